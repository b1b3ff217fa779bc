// A small MCP server written with the official TypeScript SDK (the version pinned in tests/js), over stdio.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const server = new McpServer({ name: "ts-upstream", version: "1.0.0" });

server.registerTool(
  "shout",
  { description: "Upper-case the text.", inputSchema: { text: z.string() } },
  async ({ text }) => ({ content: [{ type: "text", text: text.toUpperCase() }] }),
);

server.registerTool(
  "pixel",
  { description: "A one-pixel PNG and a resource link.", inputSchema: {} },
  async () => ({
    content: [
      { type: "image", data: "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==", mimeType: "image/png" },
      { type: "resource_link", uri: "ts://readme", name: "readme" },
    ],
  }),
);

server.registerTool(
  "fail",
  { description: "Always an error result.", inputSchema: {} },
  async () => ({ content: [{ type: "text", text: "it broke" }], isError: true }),
);

await server.connect(new StdioServerTransport());
