//! Integration tests of the formats crate: the real corpus of every system, round trips, and
//! generated cases in every format.

mod corpus;
mod harness;
mod roundtrip;
