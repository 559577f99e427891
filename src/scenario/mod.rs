//! Scenario files: parse, validate, resolve into plain data.

pub mod model;
