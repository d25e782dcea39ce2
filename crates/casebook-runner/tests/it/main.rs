mod grade;
mod letta_suite;
mod target;
