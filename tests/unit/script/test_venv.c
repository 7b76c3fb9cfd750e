/* Tests of script/venv.c: a venv made from a small wheel this test builds (a plain zip with its
 * dist-info files; pip needs no network for it), used by a real script_run, cached on the
 * second call, and a failed build that leaves nothing; directly and in bubblewrap.
 *
 * Needs `python3 -m venv` with ensurepip (Debian: python3-venv); skipped, saying so, without. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "script/run.h"
#include "script/sandbox.h"
#include "script/venv.h"
#include "tests/unit/check.h"
#include "tests/unit/script/testfs.h"
#include "util/err.h"
#include "util/timeutil.h"

#define PY "/usr/bin/python3"

static char root[512];

typedef struct logs {
    int n;
    int saw_42;
} logs;

static void on_log(void *u, const char *line)
{
    logs *l = u;
    l->n++;
    if (strstr(line, "value=42"))
        l->saw_42 = 1;
}

/* code/ with tinypkg-0.1-py3-none-any.whl, requirements.txt naming it, and use.py. */
static void make_code(const char *code)
{
    mkdir(code, 0755);
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             PY " -c \"import zipfile\n"
                "z = zipfile.ZipFile('%s/tinypkg-0.1-py3-none-any.whl', 'w')\n"
                "z.writestr('tinypkg/__init__.py', 'VALUE = 42\\n')\n"
                "z.writestr('tinypkg-0.1.dist-info/METADATA', 'Metadata-Version: 2.1\\nName: "
                "tinypkg\\nVersion: 0.1\\n')\n"
                "z.writestr('tinypkg-0.1.dist-info/WHEEL', 'Wheel-Version: 1.0\\nGenerator: "
                "test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n')\n"
                "z.writestr('tinypkg-0.1.dist-info/RECORD', 'tinypkg/__init__.py,,\\n"
                "tinypkg-0.1.dist-info/METADATA,,\\ntinypkg-0.1.dist-info/WHEEL,,\\n"
                "tinypkg-0.1.dist-info/RECORD,,\\n')\n"
                "z.close()\"",
             code);
    CHECK_INT(system(cmd), 0);
    char p[1024];
    snprintf(p, sizeof p, "%s/requirements.txt", code);
    write_file(p, "./tinypkg-0.1-py3-none-any.whl\n", 0644);
    snprintf(p, sizeof p, "%s/use.py", code);
    write_file(p, "import tinypkg\nprint('value=%d' % tinypkg.VALUE)\n", 0644);
}

static void test_venv(int sb)
{
    char jd[600], code[700], cache[600], req[800], err[ERR_LEN] = "";
    snprintf(jd, sizeof jd, "%s/job-%d", root, sb);
    mkdir(jd, 0755);
    snprintf(code, sizeof code, "%s/code", jd);
    make_code(code);
    snprintf(cache, sizeof cache, "%s/venvs-%d/deeper", root, sb);
    snprintf(req, sizeof req, "%s/requirements.txt", code);

    logs l = {0};
    char py[1024] = "";
    CHECK_INT(script_venv(PY, req, code, cache, sb, on_log, &l, py, sizeof py, err), 0);
    if (err[0])
        fprintf(stderr, "venv: %s\n", err);
    CHECK(l.n > 0); /* pip's output came */
    CHECK(strncmp(py, cache, strlen(cache)) == 0 && strstr(py, "/bin/python"));

    /* the script runs with the venv's interpreter and imports the package */
    logs r = {0};
    script_opts o = {.job_dir = jd, .script = "use.py", .python = py, .sandbox = sb};
    script_hooks h = {.user = &r, .on_log = on_log};
    script_result res;
    CHECK_INT(script_run(&o, &h, &res, err), 0);
    CHECK_INT(res.exit_code, 0);
    CHECK(r.saw_42);

    /* cached: the same interpreter at once, nothing run */
    logs again = {0};
    char py2[1024] = "";
    double t0 = time_mono();
    CHECK_INT(script_venv(PY, req, code, cache, sb, on_log, &again, py2, sizeof py2, err), 0);
    CHECK(time_mono() - t0 < 0.5);
    CHECK_STR(py2, py);
    CHECK_INT(again.n, 0);

    /* a failed build leaves no venv behind */
    char bad[800];
    snprintf(bad, sizeof bad, "%s/bad-requirements.txt", code);
    write_file(bad, "./no-such-0.1-py3-none-any.whl\n", 0644);
    logs lb = {0};
    char py3[1024] = "unchanged";
    CHECK_INT(script_venv(PY, bad, code, cache, sb, on_log, &lb, py3, sizeof py3, err), -EIO);
    CHECK(strstr(err, "pip install -r requirements.txt failed") != NULL);
    CHECK_STR(py3, "unchanged");
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "test $(ls -d '%s'/*/ | wc -l) -eq 1", cache);
    CHECK_INT(system(cmd), 0); /* only the good venv's folder */
}

static void test_default_dir(void)
{
    char d[512];
    setenv("TRAINYARD_VENV_CACHE", "/x/venvs", 1);
    CHECK_INT(script_venv_default_dir(d, sizeof d), 0);
    CHECK_STR(d, "/x/venvs");
    unsetenv("TRAINYARD_VENV_CACHE");
    setenv("XDG_CACHE_HOME", "/xdg", 1);
    CHECK_INT(script_venv_default_dir(d, sizeof d), 0);
    CHECK_STR(d, "/xdg/trainyard/venvs");
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", "/home/u", 1);
    CHECK_INT(script_venv_default_dir(d, sizeof d), 0);
    CHECK_STR(d, "/home/u/.cache/trainyard/venvs");
    CHECK_INT(script_venv_default_dir(d, 8), -ENAMETOOLONG);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "__script-exec"))
        return sandbox_exec_main(argc - 1, argv + 1);
    if (access(PY, X_OK) < 0)
        check_skip(PY " is missing");
    if (system(PY " -c 'import venv, ensurepip' 2>/dev/null") != 0)
        check_skip("python3 -m venv cannot make venvs here: install Debian's python3-venv");
    char cwd[256];
    if (!getcwd(cwd, sizeof cwd))
        return 1;
    snprintf(root, sizeof root, "%s/script-venv-XXXXXX", cwd);
    if (!mkdtemp(root))
        return 1;
    char why[ERR_LEN] = "";
    int sandbox = script_sandbox_available(why);
    if (!sandbox)
        printf("SKIP the sandboxed case: %s\n", why);
    for (int sb = 0; sb <= sandbox; sb++)
        test_venv(sb);
    test_default_dir();
    int rc = check_exit();
    if (rc == 0)
        rm_tree(root);
    return rc;
}
