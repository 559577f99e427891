//! The controller: cluster metadata, liveness, elections.
