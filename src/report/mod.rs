//! Reports: tables and charts of runs and sweeps.
