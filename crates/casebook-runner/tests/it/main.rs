mod grade;
mod letta_suite;
mod target;
mod tool_loop;
