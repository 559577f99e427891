//! The run's event trace: what `--trace` prints and what the trace hash digests.
//!
//! Every `tracing` event at INFO or above emitted inside a run is a significant event.
//! The hash is SipHash-1-3 with fixed keys over, per event in order: the simulated time,
//! the host it ran on (turmoil's `node` span) and its fields (the message among them). Two
//! runs of the same scenario and seed must produce the same stream, so the same hash; any
//! divergence in behaviour that reaches an event changes it. The event's target (the
//! module that emitted it) is printed but not hashed: it says where code lives, not what
//! happened, and moving code must not change a run's hash.
//!
//! One subscriber is installed for the whole process, once, and each thread's run keeps
//! its own state in a thread-local. (Scoped per-thread dispatchers would not do: tracing
//! caches each callsite's interest process-wide, so a span could be enabled in one run and
//! disabled in the next, depending on what other threads were doing, and the host name
//! would come and go from the hash.)

use siphasher::sip::SipHasher13;
use std::cell::RefCell;
use std::fmt::{self, Write as _};
use std::hash::Hasher;
use std::io::Write as _;
use std::sync::Once;
use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::subscriber::Interest;
use tracing::{span, Event, Level, Metadata, Subscriber};

const KEY_0: u64 = 0x6869_6768_7469_6465; // "hightide"
const KEY_1: u64 = 0x7472_6163_6568_7368; // "traceksh"

/// The digest of a run's significant events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceHash {
    value: u64,
    events: u64,
}

impl TraceHash {
    /// The hash of the run's events.
    pub fn value(&self) -> u64 {
        self.value
    }

    /// How many events were hashed.
    pub fn events(&self) -> u64 {
        self.events
    }
}

/// The trace state of the run on this thread.
struct RunTrace {
    hasher: SipHasher13,
    events: u64,
    print: Print,
}

/// Which events `--trace` prints. Every INFO event is hashed whatever is printed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Print {
    #[default]
    Nothing,
    /// The cluster's events, without the simulator's own (turmoil's binds and addresses).
    Events,
    /// Everything, the simulator's internals too (`--trace-all`).
    All,
}

impl Print {
    fn shows(self, target: &str) -> bool {
        match self {
            Print::Nothing => false,
            Print::Events => !target.starts_with("turmoil"),
            Print::All => true,
        }
    }
}

thread_local! {
    static RUN: RefCell<Option<RunTrace>> = const { RefCell::new(None) };
}

/// Writes formatted field values straight into the hasher: no allocation per event.
struct HashWriter<'a>(&'a mut SipHasher13);

impl fmt::Write for HashWriter<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0.write(s.as_bytes());
        Ok(())
    }
}

struct HashVisitor<'a>(&'a mut SipHasher13);

impl Visit for HashVisitor<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.write(field.name().as_bytes());
        let _ = write!(HashWriter(self.0), "={value:?};");
    }
}

/// Formats an event's fields for `--trace`.
struct TextVisitor<'a>(&'a mut String);

impl Visit for TextVisitor<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, " {value:?}");
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }
}

thread_local! {
    /// Host names seen in `node` spans on this thread; a span's id is its index + 1.
    static HOSTS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    /// The spans entered on this thread, outermost first.
    static ENTERED: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// The id of every span other than turmoil's `node`.
const OTHER_SPAN: u64 = u64::MAX;

/// Finds (or adds) the host of a `node` span in [`HOSTS`]: its span id.
struct NodeVisitor(Option<u64>);

impl NodeVisitor {
    fn intern(&mut self, name: &str) {
        self.0 = Some(HOSTS.with(|hosts| {
            let mut hosts = hosts.borrow_mut();
            let index = match hosts.iter().position(|h| h == name) {
                Some(index) => index,
                None => {
                    hosts.push(name.to_string());
                    hosts.len() - 1
                }
            };
            index as u64 + 1
        }));
    }
}

impl Visit for NodeVisitor {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "name" {
            self.intern(value);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "name" {
            self.intern(format!("{value:?}").trim_matches('"'));
        }
    }
}

/// The process's subscriber: hashes INFO events into the current thread's run and, when
/// asked, prints them stamped with simulated time and host. Spans matter only as
/// turmoil's `node` span, which turmoil opens around every host's every tick: its id is
/// the host's interned index, so a tick costs a lookup, not an allocation.
struct TraceSubscriber;

impl Subscriber for TraceSubscriber {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        if self.enabled(meta) {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        *meta.level() <= Level::INFO
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(LevelFilter::INFO)
    }

    fn new_span(&self, attrs: &span::Attributes<'_>) -> span::Id {
        let mut node = NodeVisitor(None);
        if attrs.metadata().name() == "node" {
            attrs.record(&mut node);
        }
        span::Id::from_u64(node.0.unwrap_or(OTHER_SPAN))
    }

    fn record(&self, _: &span::Id, _: &span::Record<'_>) {}

    fn record_follows_from(&self, _: &span::Id, _: &span::Id) {}

    fn enter(&self, span: &span::Id) {
        ENTERED.with(|entered| entered.borrow_mut().push(span.into_u64()));
    }

    fn exit(&self, span: &span::Id) {
        ENTERED.with(|entered| {
            let mut entered = entered.borrow_mut();
            if let Some(i) = entered.iter().rposition(|&id| id == span.into_u64()) {
                entered.remove(i);
            }
        });
    }

    fn event(&self, event: &Event<'_>) {
        RUN.with(|run| {
            let mut run = run.borrow_mut();
            let Some(run) = run.as_mut() else { return };
            let meta = event.metadata();
            let now = crate::os::clock::now().since_start();
            let node = ENTERED.with(|entered| {
                entered
                    .borrow()
                    .iter()
                    .copied()
                    .find(|&id| id != OTHER_SPAN)
            });
            HOSTS.with(|hosts| {
                let hosts = hosts.borrow();
                let host = node
                    .and_then(|id| hosts.get(id as usize - 1))
                    .map_or("world", String::as_str);
                run.hasher.write_u128(now.as_nanos());
                run.hasher.write(host.as_bytes());
                event.record(&mut HashVisitor(&mut run.hasher));
                run.events += 1;
                if run.print.shows(meta.target()) {
                    let mut line = format!(
                        "{:>10.3}s {:<11} {:<5} {}:",
                        now.as_secs_f64(),
                        host,
                        meta.level(),
                        meta.target()
                    );
                    event.record(&mut TextVisitor(&mut line));
                    let _ = writeln!(std::io::stderr().lock(), "{line}");
                }
            });
        });
    }
}

/// Install the process's one subscriber, once. If a program already installed another,
/// runs still work, but their events are neither hashed nor printed.
fn install() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        if tracing::subscriber::set_global_default(TraceSubscriber).is_err() {
            let _ = writeln!(std::io::stderr(), "hightide: another tracing subscriber is installed; trace hashes will not cover events");
        }
    });
}

/// Runs `f` as one run on this thread: its INFO events are hashed (and printed as `print`
/// says). Returns `f`'s result and the hash. Seeds on other threads keep their own.
pub fn with_trace<T>(print: Print, f: impl FnOnce() -> T) -> (T, TraceHash) {
    install();
    let previous = RUN.with(|run| {
        run.borrow_mut().replace(RunTrace {
            hasher: SipHasher13::new_with_keys(KEY_0, KEY_1),
            events: 0,
            print,
        })
    });
    let result = f();
    let finished = RUN.with(|run| std::mem::replace(&mut *run.borrow_mut(), previous));
    let hash = finished.map_or(
        TraceHash {
            value: 0,
            events: 0,
        },
        |run| TraceHash {
            value: run.hasher.finish(),
            events: run.events,
        },
    );
    (result, hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn emit(values: &[u64]) -> u64 {
        let ((), hash) = with_trace(Print::Nothing, || {
            for v in values {
                tracing::info!(value = v, "event");
            }
        });
        hash.value()
    }

    #[test]
    fn same_events_same_hash() {
        assert_eq!(emit(&[1, 2, 3]), emit(&[1, 2, 3]));
    }

    #[test]
    fn different_or_reordered_events_change_the_hash() {
        assert_ne!(emit(&[1, 2, 3]), emit(&[1, 2, 4]));
        assert_ne!(emit(&[1, 2, 3]), emit(&[2, 1, 3]));
    }

    #[test]
    fn debug_events_are_not_significant() {
        let ((), hash) = with_trace(Print::Nothing, || {
            tracing::info!(value = 1, "event");
            tracing::debug!(value = 2, "detail");
        });
        assert_eq!(hash.value(), emit(&[1]));
        assert_eq!(hash.events(), 1);
    }

    #[test]
    fn what_is_printed_does_not_change_the_hash() {
        let events = || {
            tracing::info!(value = 1, "event");
            tracing::info!(target: "turmoil", value = 2, "internal");
        };
        let (_, quiet) = with_trace(Print::Nothing, events);
        let (_, all) = with_trace(Print::All, events);
        assert_eq!(quiet, all);
        assert!(Print::Events.shows("hightide::kafka::broker"));
        assert!(!Print::Events.shows("turmoil"));
        assert!(Print::All.shows("turmoil"));
    }

    #[test]
    fn runs_on_other_threads_do_not_mix() {
        let alone = emit(&[7, 8, 9]);
        let threads: Vec<_> = (0..4)
            .map(|_| std::thread::spawn(|| emit(&[7, 8, 9])))
            .collect();
        for thread in threads {
            assert_eq!(thread.join().expect("thread"), alone);
        }
    }
}
