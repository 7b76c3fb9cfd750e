-- wrk script for bench/predict.sh: POST the JSON body in the file $PREDICT_BODY (a :predict
-- request); without it, wrk's plain GET. Prints the non-2xx count on a line of its own.
local path = os.getenv("PREDICT_BODY")
if path and path ~= "" then
  local f = assert(io.open(path, "rb"))
  wrk.method = "POST"
  wrk.body = f:read("*a")
  f:close()
  wrk.headers["Content-Type"] = "application/json"
end

function done(summary, latency, requests)
  io.write(string.format("predict.lua: requests %d non2xx %d errors %d\n", summary.requests,
    summary.errors.status, summary.errors.connect + summary.errors.read +
    summary.errors.write + summary.errors.timeout))
end
