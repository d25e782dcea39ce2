mod grade;
mod letta_suite;
mod mcp;
mod target;
mod tool_loop;
