-- wrk script for compare.py: POST one MCP tools/call over and over, any tool, either era.
--
-- Arguments (after `--`): <check> <threads> <mode> <tool> <arguments-json> <expected> <session-id>...
--   check           "1" to inspect every response (status 200 and <expected> in the body);
--                   "0" leaves response() unset so wrk skips reading bodies.
--   threads         wrk's -t (init() is not told it otherwise).
--   mode            "modern": stateless 2026-07-28 requests (MCP-Protocol-Version, Mcp-Method and
--                   Mcp-Name headers, per-request _meta in the body, no session id);
--                   "session": 2025-11-25 requests on the given sessions (no session ids:
--                   stateless 2025-11-25 requests).
--   tool            the tool's name; arguments-json its arguments, as a JSON object.
--   expected        a string every good response body contains (the result's text, JSON-escaped).
--   session-id      (mode "session") thread t takes the ids whose position % threads == t and
--                   rotates through them, one request after another.
-- Request ids are unique across the whole run. done() prints one machine-readable line:
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
local tool = "echo"
local arguments = "{}"
local expected = ""
bad = 0        -- responses that were not 200 with the expected text in the body (check mode)
non2xx = 0     -- responses with a status other than 200 (check mode)
checked = 0

local function check_response(status, headers, body)
  checked = checked + 1
  if status ~= 200 then
    non2xx = non2xx + 1
    bad = bad + 1
  elseif body == nil or not string.find(body, expected, 1, true) then
    bad = bad + 1
  end
end

function init(args)
  local check = args[1] == "1"
  nthreads = tonumber(args[2])
  modern = args[3] == "modern"
  tool = args[4]
  arguments = args[5]
  expected = args[6]
  local base = {
    ["Content-Type"] = "application/json",
    ["Accept"] = "application/json, text/event-stream",
  }
  if modern then
    base["MCP-Protocol-Version"] = "2026-07-28"
    base["Mcp-Method"] = "tools/call"
    base["Mcp-Name"] = tool
    headers_of[1] = base
  else
    base["MCP-Protocol-Version"] = "2025-11-25"
    local sessions = {}
    for i = 7, #args do sessions[#sessions + 1] = args[i] end
    for i, sid in ipairs(sessions) do
      if (i - 1) % nthreads == tid or #sessions < nthreads then
        local h = {}
        for k, v in pairs(base) do h[k] = v end
        h["Mcp-Session-Id"] = sid
        headers_of[#headers_of + 1] = h
      end
    end
    if #headers_of == 0 then headers_of[1] = base end
  end
  if check then response = check_response else response = nil end
end

function request()
  count = count + 1
  local id = count * nthreads + tid
  local params = '{"name":"' .. tool .. '","arguments":' .. arguments
  if modern then
    params = params .. ',"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",' ..
      '"io.modelcontextprotocol/clientCapabilities":{}}'
  end
  local body = '{"jsonrpc":"2.0","id":' .. id .. ',"method":"tools/call","params":' .. params .. '}}'
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
