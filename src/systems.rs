//! The broker systems the lab runs, and the one place that picks a variant's. Each
//! system lives in its own folder with its side of the harness's seam
//! (`kafka::system::Kafka`, `rocketmq::system::RocketMq`, each a `sim::system::System`);
//! the harness is generic over it and names none of them.

use crate::kafka::system::Kafka;
use crate::rocketmq::system::RocketMq;
use crate::scenario::model::{SystemName, Variant};
use crate::sim::runner::{self, RunOptions, RunOutcome};
use crate::sim::system::RunError;

/// Runs one variant on one seed, on the variant's system (`[cluster] system`).
pub fn run(variant: &Variant, seed: u64, options: &RunOptions) -> Result<RunOutcome, RunError> {
    match variant.settings.cluster.system {
        SystemName::Kafka => runner::run::<Kafka>(variant, seed, options),
        SystemName::RocketMq => runner::run::<RocketMq>(variant, seed, options),
    }
}
