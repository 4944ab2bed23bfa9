//! The outer wall for a runtime that owns its process: one call confines the process with
//! Landlock to what its capsules need (read beneath the workdirs, write beneath `peer-in/`,
//! connect only to the ports the allow rules reach, no new listener). The `serve` and `demo`
//! commands put it up before starting their async runtime. See [`Confinement`] for what it
//! allows and what it does not cover.

pub use crate::backends::confine::{
    ConfineError, Confinement, ConfinementReport, ConfinementStatus, landlock_abi,
};
