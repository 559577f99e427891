//! The second pass: one variant's `Settings` from the defaults, the top-level assignments
//! and the variant's own, checked as a whole (Kafka's cross-key producer rules, the
//! workload's topic, the faults against the cluster).

use super::cluster::unknown_topic;
use super::faults::{check_faults, FaultChoice};
use super::keys;
use super::sections::{Assign, Sec};
use super::top::Doc;
use super::variants::RawVariant;
use crate::config::kafka::{ProducerConfig, Release};
use crate::config::rocketmq::RocketMqConfig;
use crate::scenario::model::{Commit, Settings, SystemName, Variant};
use crate::scenario::{suggest, Error};
use std::collections::BTreeMap;
use std::ops::Range;
use std::time::Duration;

pub(super) fn resolve_variants(doc: &Doc, raws: &[RawVariant]) -> Result<Vec<Variant>, Error> {
    let mut variants = Vec::with_capacity(raws.len());
    for raw in raws {
        let settings = resolve(doc, Some(raw))?;
        let mut expect = doc.expect.clone();
        expect.extend(raw.expect.iter().copied());
        let mut expect_some = doc.expect_some.clone();
        expect_some.extend(raw.expect_some.iter().copied());
        variants.push(Variant::new(
            raw.name.clone(),
            settings,
            expect,
            expect_some,
        ));
    }
    Ok(variants)
}

/// A run as errors about its system name it: the variant, or the scenario without one.
pub(super) fn run_name(variant: Option<&RawVariant>) -> String {
    match variant {
        Some(variant) => format!("variant `{}`", variant.name),
        None => "the scenario".to_owned(),
    }
}

/// One variant's settings (the top level's, with `None`): the release's defaults
/// (`--set`'s release, else the variant's, else the file's), then the top-level
/// assignments, then the variant's, then `--set`'s. A key of one system's section in a
/// run of the other is an error, wherever it is set.
pub(super) fn resolve(doc: &Doc, variant: Option<&RawVariant>) -> Result<Settings, Error> {
    let own: &[Assign] = variant.map_or(&[], |v| &v.assigns);
    let faults = doc
        .set
        .faults
        .as_ref()
        .or(variant.and_then(|v| v.faults.as_ref()))
        .or(doc.faults.as_ref());
    let run = run_name(variant);
    let (duration, _) = doc
        .duration
        .clone()
        .ok_or_else(|| Error::nowhere("missing `duration` (the simulated time of the workload phase, e.g. duration = \"30s\")".to_owned()))?;
    let cluster_set = match variant {
        Some(variant) => doc.set.cluster.over(&variant.cluster),
        None => doc.set.cluster.clone(),
    };
    let cluster = doc
        .cluster
        .as_ref()
        .ok_or_else(|| Error::nowhere("missing [cluster] (brokers and topics)".to_owned()))?
        .resolve(&cluster_set, &run)?;
    let release = cluster.kafka;
    let era = release.era();
    let mut settings = Settings {
        duration,
        heal: doc.heal.unwrap_or(Duration::from_secs(30)),
        cluster,
        broker: era.broker,
        producer: era.producer,
        consumer: era.consumer,
        workload: keys::default_workload(),
        rocketmq: RocketMqConfig::default(),
        disk: Default::default(),
        network: keys::default_network(),
        faults: Vec::new(),
        nemesis: doc.nemesis.clone(),
        bugs: Default::default(),
    };
    // The value span of every key set explicitly (the last setting wins).
    let mut explicit: BTreeMap<(Sec, &str), Range<usize>> = BTreeMap::new();
    let system = settings.cluster.system;
    for assign in doc.assigns.iter().chain(own).chain(&doc.set.assigns) {
        if let Some(home) = assign.sec.system().filter(|home| *home != system) {
            return Err(other_system(assign, home, &run));
        }
        if let Some((added, source)) = release.lacks_key(assign.sec.name(), &assign.key) {
            return Err(Error::at(
                &assign.value.span,
                format!(
                    "`{}` is not a key of Kafka {release}: it came in {added} ({source})",
                    assign.key
                ),
            ));
        }
        assign
            .sec
            .apply(&mut settings, &assign.key, &assign.value)?;
        explicit.insert((assign.sec, assign.key.as_str()), assign.value.span.clone());
    }
    producer_rules(&mut settings.producer, &explicit)?;
    transaction_rules(&settings, &explicit)?;
    group_rules(&mut settings, &explicit)?;
    resolve_workload_topic(&mut settings, explicit.get(&(Sec::Workload, "topic")))?;
    processor_rules(&settings, &explicit)?;
    let chosen = match faults {
        None => Vec::new(),
        Some(FaultChoice::Script(faults)) => faults.clone(),
        Some(FaultChoice::Set { name, span }) => match doc.fault_sets.get(name) {
            Some(faults) => faults.clone(),
            None => {
                let names: Vec<&str> = doc.fault_sets.keys().map(String::as_str).collect();
                let message = if names.is_empty() {
                    format!(
                        "unknown fault set `{name}`: the scenario defines no [[fault_sets.NAME]]"
                    )
                } else {
                    match suggest(name, &names) {
                        Some(near) => format!("unknown fault set `{name}`; did you mean `{near}`?"),
                        None => format!(
                            "unknown fault set `{name}`; the sets are: {}",
                            names.join(", ")
                        ),
                    }
                };
                return Err(Error::at(span, message));
            }
        },
    };
    check_faults(&chosen, &settings, &run)?;
    settings.faults = chosen.into_iter().map(|f| f.fault).collect();
    Ok(settings)
}

/// A key of `home`'s own section in a run of the other system: a file that compares the
/// systems shares only the harness's sections ([workload], [disk], [network]).
fn other_system(assign: &Assign, home: SystemName, run: &str) -> Error {
    let message = match home {
        SystemName::Kafka => format!(
            "`{}` is a Kafka key ([{}]), and {run} runs RocketMQ: RocketMQ's settings are in \
             [rocketmq] (`hightide config --rocketmq` lists them)",
            assign.key,
            assign.sec.name()
        ),
        SystemName::RocketMq => format!(
            "`{}` is a RocketMQ key ([rocketmq]), and {run} runs Kafka: a RocketMQ run sets \
             [cluster] system = \"rocketmq\" (or `cluster.system` in a variant)",
            assign.key
        ),
    };
    Error::at(&assign.value.span, message)
}

/// Kafka's producer rules between keys (KafkaProducer's constructor): idempotence's needs
/// (`ProducerConfig::idempotence_conflict`; explicitly enabled, it sets the keys left
/// unset to what it needs and is an error against a key set explicitly; left at its
/// default it is quietly off); `delivery.timeout.ms` left at its
/// default is raised to `linger.ms + request.timeout.ms`. Set explicitly below that, Kafka
/// refuses it, but the full example of docs/scenarios.md does so (30000 < 5 + 30000) and
/// must run: the value stands, and a request may be cut short by the delivery timeout.
/// Before Kafka 2.1 there is no delivery timeout (the key is refused before this), and
/// the release's `expire_in_accumulator` bounds a batch instead.
fn producer_rules(
    producer: &mut ProducerConfig,
    explicit: &BTreeMap<(Sec, &str), Range<usize>>,
) -> Result<(), Error> {
    let span_of = |key: &'static str| explicit.get(&(Sec::Producer, key));
    // A transactional producer is idempotent: `transactional.id` enables idempotence as
    // an explicit `enable.idempotence` = true does, and refuses it set to false.
    let transactional = span_of("transactional.id");
    if let Some(span) = transactional {
        if !producer.enable_idempotence && span_of("enable.idempotence").is_some() {
            return Err(Error::at(
                span,
                "`transactional.id` needs `enable.idempotence` = true (Kafka: \"Cannot set a transactional.id without also enabling idempotence\")".to_owned(),
            ));
        }
        producer.enable_idempotence = true;
    }
    while producer.enable_idempotence {
        let Some(conflict) = producer.idempotence_conflict() else {
            break;
        };
        let Some(idempotence) = span_of("enable.idempotence").or(transactional) else {
            producer.enable_idempotence = false;
            break;
        };
        // Enabled explicitly: Kafka sets what idempotence needs in the keys left unset
        // (`ProducerConfig.maybeOverrideAcksAndRetries`, 0.11's `configureAcks` and
        // `configureInflightRequests`), and refuses only a key set against it.
        if span_of(conflict.key).is_none() {
            producer.settle_for_idempotence(conflict.key);
            continue;
        }
        return Err(Error::at(
            span_of(conflict.key).unwrap_or(idempotence),
            format!(
                "{} needs {} (Kafka rejects this producer configuration)",
                if span_of("enable.idempotence").is_some() {
                    "`enable.idempotence` = true"
                } else {
                    "`transactional.id` (a transactional producer is idempotent)"
                },
                conflict.needs
            ),
        ));
    }
    let floor = producer.linger.saturating_add(producer.request_timeout);
    let raised = producer.delivery_timeout < floor && span_of("delivery.timeout.ms").is_none();
    if raised {
        producer.delivery_timeout = floor;
    }
    Ok(())
}

/// A transactional producer's keys against the brokers' and the workload's: Kafka's
/// `initTransactions` fails with INVALID_TRANSACTION_TIMEOUT when `transaction.timeout.ms`
/// is above `transaction.max.timeout.ms`, and `transaction_messages` means nothing without
/// a `transactional.id`.
fn transaction_rules(
    settings: &Settings,
    explicit: &BTreeMap<(Sec, &str), Range<usize>>,
) -> Result<(), Error> {
    let producer = &settings.producer;
    if producer.transactional_id.is_none() {
        if let Some(span) = explicit.get(&(Sec::Workload, "transaction_messages")) {
            return Err(Error::at(
                span,
                "`transaction_messages` needs `[producer] \"transactional.id\"`: only a transactional producer sends in transactions".to_owned(),
            ));
        }
        return Ok(());
    }
    let max = settings.broker.transaction_max_timeout;
    if producer.transaction_timeout > max {
        let span = explicit
            .get(&(Sec::Producer, "transaction.timeout.ms"))
            .or_else(|| explicit.get(&(Sec::Broker, "transaction.max.timeout.ms")))
            .cloned();
        return Err(Error {
            span,
            message: format!(
                "`transaction.timeout.ms` {} is above the brokers' `transaction.max.timeout.ms` {}: Kafka's initTransactions fails with INVALID_TRANSACTION_TIMEOUT",
                producer.transaction_timeout.as_millis(),
                max.as_millis()
            ),
        });
    }
    Ok(())
}

/// A group's commit mode decides `enable.auto.commit` (an explicit one that disagrees is
/// an error); `commit`, `processing` and `output` mean nothing without a group, nor a
/// group without consumers.
fn group_rules(
    settings: &mut Settings,
    explicit: &BTreeMap<(Sec, &str), Range<usize>>,
) -> Result<(), Error> {
    let workload = &settings.workload;
    let rocketmq = settings.cluster.system == SystemName::RocketMq;
    if rocketmq && workload.consumers > 0 && workload.group.is_none() {
        let span = explicit.get(&(Sec::Workload, "consumers")).cloned();
        return Err(Error {
            span,
            message: "RocketMQ consumers are members of a consumer group: set `group`".into(),
        });
    }
    if rocketmq && workload.commit != Commit::Auto {
        let span = explicit.get(&(Sec::Workload, "commit")).cloned();
        return Err(Error {
            span,
            message: format!(
                "`commit` = \"{}\": RocketMQ's push consumer commits what it has consumed, with each pull and every persistConsumerOffsetInterval (5 s); \"auto\" is its only mode",
                workload.commit.name()
            ),
        });
    }
    let Some(group) = &workload.group else {
        for key in ["commit", "processing", "output"] {
            if let Some(span) = explicit.get(&(Sec::Workload, key)) {
                return Err(Error::at(
                    span,
                    format!("`{key}` needs a `group`: consumers outside a group commit nothing"),
                ));
            }
        }
        return Ok(());
    };
    if workload.consumers == 0 {
        let span = explicit.get(&(Sec::Workload, "group")).cloned();
        return Err(Error {
            span,
            message: format!("group `{group}` has no members: set `consumers` to 1 or more"),
        });
    }
    let replicas = settings.broker.offsets_topic_replication_factor;
    // Kafka's __consumer_offsets; RocketMQ keeps a group's offsets on each master.
    let kafka = settings.cluster.system == SystemName::Kafka;
    if kafka && replicas > settings.cluster.brokers {
        // Kafka creates no __consumer_offsets then, and no group ever finds a coordinator.
        let span = explicit
            .get(&(Sec::Broker, "offsets.topic.replication.factor"))
            .or_else(|| explicit.get(&(Sec::Workload, "group")))
            .cloned();
        return Err(Error {
            span,
            message: format!(
                "group `{group}` needs __consumer_offsets with `offsets.topic.replication.factor` = {replicas} replicas, more than the {} brokers: lower it or add brokers",
                settings.cluster.brokers
            ),
        });
    }
    let auto = workload.commit == Commit::Auto;
    if let Some(span) = explicit.get(&(Sec::Consumer, "enable.auto.commit")) {
        if settings.consumer.enable_auto_commit != auto {
            return Err(Error::at(
                span,
                format!(
                    "`enable.auto.commit` = {} disagrees with [workload] commit = \"{}\", which sets it to {auto}",
                    settings.consumer.enable_auto_commit,
                    workload.commit.name()
                ),
            ));
        }
    }
    settings.consumer.enable_auto_commit = auto;
    Ok(())
}

/// A processor's output topic is another topic of the cluster; exactly once
/// (`commit = "transactional"`) is a processor's, with Kafka's transactions (0.11+).
fn processor_rules(
    settings: &Settings,
    explicit: &BTreeMap<(Sec, &str), Range<usize>>,
) -> Result<(), Error> {
    let workload = &settings.workload;
    let commit_span = || explicit.get(&(Sec::Workload, "commit")).cloned();
    if let Some(output) = &workload.output {
        let span = explicit.get(&(Sec::Workload, "output")).cloned();
        let fail = |message: String| {
            Err(Error {
                span: span.clone(),
                message,
            })
        };
        if settings.cluster.system != SystemName::Kafka {
            return fail("`output`: RocketMQ's stream processors are not modelled yet; only Kafka's group members can be processors".to_owned());
        }
        let names = settings.cluster.topic_names();
        if !names.contains(&output.as_str()) {
            return fail(unknown_topic(output, &names));
        }
        if *output == workload.topic {
            return fail(format!(
                "`output` = \"{output}\" is the topic the processors read: write their outputs to another topic of [cluster]"
            ));
        }
    } else if workload.commit == Commit::Transactional {
        return Err(Error {
            span: commit_span(),
            message: "`commit` = \"transactional\" is a processor's exactly once (outputs and offsets in one transaction): set `output`, the topic the processors write".to_owned(),
        });
    }
    if workload.commit == Commit::Transactional
        && settings.cluster.kafka
            < (Release {
                major: 0,
                minor: 11,
            })
    {
        return Err(Error {
            span: commit_span(),
            message: format!(
                "`commit` = \"transactional\" needs Kafka's transactions, which came in 0.11 (KIP-98), not in Kafka {}",
                settings.cluster.kafka
            ),
        });
    }
    if workload.commit == Commit::Transactional {
        // The processors' producers are transactional, so idempotent: Kafka sets what
        // idempotence needs in the keys left unset, and refuses a key set against it.
        let refuse = |span, needs| {
            Err(Error::at(
                span,
                format!("`commit` = \"transactional\" makes the processors' producers transactional, so idempotent: they need {needs} (Kafka rejects this producer configuration)"),
            ))
        };
        let mut producer = settings.producer.clone();
        if let Some(span) = explicit.get(&(Sec::Producer, "enable.idempotence")) {
            if !producer.enable_idempotence {
                return refuse(span, "`enable.idempotence` = true");
            }
        }
        while let Some(conflict) = producer.idempotence_conflict() {
            if let Some(span) = explicit.get(&(Sec::Producer, conflict.key)) {
                return refuse(span, conflict.needs);
            }
            producer.settle_for_idempotence(conflict.key);
        }
    }
    Ok(())
}

fn resolve_workload_topic(
    settings: &mut Settings,
    span: Option<&Range<usize>>,
) -> Result<(), Error> {
    let names = settings.cluster.topic_names();
    match span {
        None => match names.as_slice() {
            [only] => {
                settings.workload.topic = (*only).to_owned();
                Ok(())
            }
            _ => Err(Error::nowhere(format!(
                "[workload] needs a `topic`: the cluster has {} topics ({})",
                names.len(),
                names.join(", ")
            ))),
        },
        Some(span) => {
            let topic = &settings.workload.topic;
            if names.contains(&topic.as_str()) {
                return Ok(());
            }
            Err(Error::at(span, unknown_topic(topic, &names)))
        }
    }
}
