"""`trainyard --help` and `trainyard CMD --help` agree with the docs: every command the docs
run is listed by `trainyard --help`, and every flag they give a command is in its --help."""
import pathlib
import re
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "deploy").glob("*.service"))]


def help_text(binary, *cmd):
    proc = subprocess.run([str(binary), *cmd, "--help"], capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 0, (cmd, proc.stderr)
    return proc.stdout


def code_in(path):
    """The code in a doc: fenced blocks and `spans` of Markdown, ExecStart= of a unit."""
    text = path.read_text().replace("\\\n", " ")
    if path.suffix == ".service":
        return re.findall(r"^ExecStart=(.*)$", text, re.M)
    blocks = re.findall(r"```[a-z]*\n(.*?)```", text, re.S)
    rest = re.sub(r"```.*?```", "", text, flags=re.S)
    return blocks + re.findall(r"`([^`\n]+)`", rest)


def documented_uses():
    """(file, command, flags) for each `trainyard COMMAND ...` in the docs' code."""
    for path in DOCS:
        text = "\n".join(code_in(path))
        for m in re.finditer(r"(?:^|[\s`(=])(?:/usr/local/bin/|build/)?trainyard ([a-z]+)([^\n`|;)]*)",
                             text, re.M):
            flags = re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", m.group(2))
            yield path.name, m.group(1), flags


def test_every_documented_command_and_flag_is_in_help(trainyard_bin):
    top = help_text(trainyard_bin)
    commands = set(re.findall(r"^  ([a-z]+)\s", top, re.M))
    problems = []
    seen = 0
    for name, cmd, flags in documented_uses():
        if cmd not in commands:
            problems.append(f"{name}: `trainyard {cmd}` is not in `trainyard --help`")
            continue
        text = help_text(trainyard_bin, cmd)
        for flag in flags:
            seen += 1
            if flag not in text:
                problems.append(f"{name}: `trainyard {cmd} {flag}` is not in its --help")
    assert seen > 20  # the docs do use flags: the scan found them
    assert not problems, "\n".join(sorted(set(problems)))


def test_every_command_has_help_and_is_listed(trainyard_bin):
    top = help_text(trainyard_bin)
    for cmd in re.findall(r"^  ([a-z]+)\s", top, re.M):
        assert help_text(trainyard_bin, cmd).startswith("usage: trainyard " + cmd), cmd
