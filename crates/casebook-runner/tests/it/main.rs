mod grade;
mod target;
