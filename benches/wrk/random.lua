-- Requests the 10,000 files of /many/dNN/fNN.html (made by benches/harness.py)
-- in random order, each thread with its own seed, and prints the summary as
-- report.lua does.
local n = 0
setup = function(thread)
  n = n + 1
  thread:set("seed", n)
end
init = function(args)
  math.randomseed(os.time() * 1000 + (seed or 0))
end
request = function()
  local d = math.random(0, 99)
  local f = math.random(0, 99)
  return wrk.format("GET", string.format("/many/d%02d/f%02d.html", d, f))
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests":%d,"bytes":%d,"duration_us":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,"p50":%d,"p99":%d,"max":%d,"mean":%d}\n',
    summary.requests, summary.bytes, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99), latency.max, latency.mean))
end
