mod grade;
mod letta_suite;
mod mcp;
mod target;
