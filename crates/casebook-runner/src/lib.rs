//! Running datasets against agents: targets, graders, run hashes, results (SPEC §8, §9).
//!
//! The agent-facing side ([`protocol`], [`target`]) is built from a case's task half only; the
//! graders ([`grade`]) are the only code that reads expectations.

pub mod comparison;
pub mod engine;
pub mod environment;
pub mod experiment;
pub mod freeze;
pub mod grade;
pub mod hash;
pub mod letta_suite;
pub mod mcp;
pub mod noise;
pub mod pairing;
pub mod planned;
pub mod protocol;
pub mod record;
pub mod report;
pub mod seeds;
pub mod sorted;
pub mod summary;
pub mod target;
