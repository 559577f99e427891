//! Brokers: replica manager, partitions, fetchers, purgatory.
