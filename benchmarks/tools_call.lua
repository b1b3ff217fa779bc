-- wrk script for bench_http.py: POST an MCP tools/call (echo {"text":"hello"}) over and over.
--
-- Arguments (after `--`): <check> <threads> <mode> <session-id>...
--   check       "1" to inspect every response (status 2xx and the echoed text in the body);
--               "0" leaves response() unset so wrk skips parsing headers and bodies.
--   threads     wrk's -t (init() is not told it otherwise).
--   mode        "session": 2025-11-25 requests on the given sessions;
--               "modern": stateless 2026-07-28 requests (MCP-Protocol-Version, Mcp-Method and
--               Mcp-Name headers, per-request _meta in the body, no session id); the check also
--               wants "resultType":"complete" in the body. No session ids follow.
--   session-id  (mode "session") one per connection; thread t takes the ids whose
--               position % threads == t and rotates through them, one request after another.
-- Request ids are unique across the whole run (counter * threads + thread index), so a session
-- never sees the same id twice in flight. done() prints one machine-readable line:
--   WRK_RESULT {...json...}

local threads = {}

function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end

local headers_of = {}
local count = 0
local nthreads = 1
local modern = false
bad = 0        -- responses that were not 200 with the echo in the body (check mode)
non2xx = 0     -- responses with a status outside 200-299 (check mode)
checked = 0

local function check_response(status, headers, body)
  checked = checked + 1
  if status < 200 or status > 299 then
    non2xx = non2xx + 1
    bad = bad + 1
  elseif body == nil or not string.find(body, '"text":"hello"', 1, true) then
    bad = bad + 1
  elseif modern and not string.find(body, '"resultType":"complete"', 1, true) then
    bad = bad + 1
  end
end

function init(args)
  local check = args[1] == "1"
  nthreads = tonumber(args[2])
  modern = args[3] == "modern"
  if modern then
    headers_of[1] = {
      ["Content-Type"] = "application/json",
      ["Accept"] = "application/json, text/event-stream",
      ["MCP-Protocol-Version"] = "2026-07-28",
      ["Mcp-Method"] = "tools/call",
      ["Mcp-Name"] = "echo",
    }
  end
  local sessions = {}
  for i = 4, #args do sessions[#sessions + 1] = args[i] end
  for i, sid in ipairs(sessions) do
    if (i - 1) % nthreads == tid or #sessions < nthreads then
      headers_of[#headers_of + 1] = {
        ["Content-Type"] = "application/json",
        ["Accept"] = "application/json, text/event-stream",
        ["Mcp-Session-Id"] = sid,
        ["MCP-Protocol-Version"] = "2025-11-25",
      }
    end
  end
  if check then response = check_response else response = nil end
end

function request()
  count = count + 1
  local id = count * nthreads + tid
  local body
  if modern then
    body = '{"jsonrpc":"2.0","id":' .. id ..
      ',"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"},' ..
      '"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",' ..
      '"io.modelcontextprotocol/clientCapabilities":{}}}}'
  else
    body = '{"jsonrpc":"2.0","id":' .. id ..
      ',"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}'
  end
  return wrk.format("POST", nil, headers_of[(count % #headers_of) + 1], body)
end

function done(summary, latency, requests)
  local b, n, c = 0, 0, 0
  for _, thread in ipairs(threads) do
    b = b + (thread:get("bad") or 0)
    n = n + (thread:get("non2xx") or 0)
    c = c + (thread:get("checked") or 0)
  end
  local e = summary.errors
  io.write(string.format(
    'WRK_RESULT {"duration_us":%d,"requests":%d,"bytes":%d,"connect_errors":%d,"read_errors":%d,' ..
    '"write_errors":%d,"status_errors":%d,"timeouts":%d,"checked":%d,"bad_bodies":%d,"non2xx":%d,' ..
    '"latency_mean_us":%.1f,"latency_max_us":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"p999_us":%d}\n',
    summary.duration, summary.requests, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
    c, b, n, latency.mean, latency.max, latency:percentile(50.0), latency:percentile(90.0),
    latency:percentile(99.0), latency:percentile(99.9)))
end
