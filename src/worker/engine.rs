//! An engine: one data-path thread, bound to its lanes' cores, that drives many
//! lanes (`transport::task::FlowTask`s: TCP streams, shards of RDMA
//! bandwidth flows) of this rank's flow ends from t0 until each is done. Readiness comes from one epoll set (`mio`,
//! edge-triggered): a lane that saw `WouldBlock` waits for its socket's
//! next event or its own deadline; one that stopped at its share of a turn
//! goes to the back of the ready list, so one busy stream cannot starve the
//! others. An engine whose lanes all measure latency spins on its poll for
//! a short while after each event instead of sleeping in `epoll_wait`, so
//! a quick round trip is not lengthened by a wake-up; a slower one sleeps
//! as a blocking client would, leaving the core to the sampler and the
//! control plane (and waking with a sleeper's priority on a busy core).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::{Events, Poll, Token};

use std::sync::Mutex;

use crate::histogram::Histogram;
use crate::load::placement;
use crate::metrics::cpu::{ThreadBook, ThreadClass, DATA_THREAD};
use crate::transport::task::{FlowTask, Turn};

/// Longest sleep in the poll, so a stop is seen promptly.
const NAP: Duration = Duration::from_millis(10);
/// The poll's own resolution: `epoll_wait` takes whole milliseconds.
const EPOLL_TICK: Duration = Duration::from_millis(1);
/// How long a latency engine spins after its last event before it sleeps:
/// a loopback or RDMA-class round trip, not longer, so a spinning engine
/// does not hold its core from the sampler or a busy host's other threads.
const SPIN: Duration = Duration::from_micros(50);

/// What the lanes of one flow end share with the sampler, whichever
/// engines (or threads) run them.
#[derive(Debug, Default)]
pub struct EndState {
    /// When the last of its lanes began moving data.
    started: Mutex<Option<Instant>>,
    /// The first error one of its lanes met.
    error: Mutex<Option<String>>,
    /// Round trips measured in the window by the latency client's end, all
    /// its streams (TCP) or rails (RDMA) merged.
    rtts: Mutex<Option<Histogram>>,
}

impl EndState {
    /// Records that one more lane began moving data now.
    pub fn note_start(&self) {
        let now = Instant::now();
        let mut latest = self.started.lock().expect("start lock");
        *latest = Some(latest.map_or(now, |prev| prev.max(now)));
    }

    /// Keeps `why` as the end's error, unless one came first.
    pub fn fail(&self, why: String) {
        self.error.lock().expect("error lock").get_or_insert(why);
    }

    /// Adds one lane's round trips to its end's.
    pub fn keep_round_trips(&self, round_trips: Histogram) {
        match &mut *self.rtts.lock().expect("latency lock") {
            Some(kept) => kept.merge(&round_trips),
            empty => *empty = Some(round_trips),
        }
    }

    pub fn started(&self) -> Option<Instant> {
        *self.started.lock().expect("start lock")
    }

    pub fn error(&self) -> Option<String> {
        self.error.lock().expect("error lock").clone()
    }

    pub fn take_round_trips(&self) -> Option<Histogram> {
        self.rtts.lock().expect("latency lock").take()
    }
}

/// Sleeps until `at`, waking early if `stop` is set.
pub fn sleep_until(at: Instant, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now >= at {
            return;
        }
        std::thread::park_timeout((at - now).min(NAP));
    }
}

/// Told when a flow fails while its phase runs (the error, naming the flow).
pub type FlowFailed = Arc<dyn Fn(String) + Send + Sync>;

/// One lane on an engine: its task and the flow end it counts for.
pub struct Seat {
    pub task: Box<dyn FlowTask>,
    pub end: Arc<EndState>,
    /// A sender's lane (it does not begin after its window closed).
    pub sender: bool,
    /// Told when the lane fails before the stop (an RDMA lane: a bad
    /// completion or a stall ends the run at once, not at the window's end).
    pub told: Option<FlowFailed>,
}

/// One engine: its number on this rank, the cores it may run on (empty:
/// wherever the process may), its lanes.
///
/// An engine is bound to its lanes' cores as a set, never to one core of
/// them: where other threads share those cores (a host's other ranks, the
/// stress burners, anything else on the node) the kernel moves it to the
/// least busy. Pinned one per core, a 3-to-1 fan-in on 4 local ranks of a
/// 2-core host fell from 52 to 32 Gb/s, and a stressed receiver's flow
/// could move nothing for a third of a second.
pub struct Engine {
    pub id: usize,
    pub cores: Vec<usize>,
    pub seats: Vec<Seat>,
}

#[cfg(any(test, feature = "testing"))]
impl Engine {
    /// Engine 0, bound to no core, for `tasks`, the lanes of one flow end
    /// (`end`; `sender`: its sending end): how tests and benchmarks drive
    /// the transport's tasks as a phase does.
    pub fn of_end(tasks: Vec<Box<dyn FlowTask>>, end: &Arc<EndState>, sender: bool) -> Engine {
        let seats = tasks.into_iter().map(|task| Seat { task, end: end.clone(), sender, told: None }).collect();
        Engine { id: 0, cores: Vec::new(), seats }
    }
}

/// A lane while the engine runs it.
struct Slot {
    task: Option<Box<dyn FlowTask>>,
    end: Arc<EndState>,
    sender: bool,
    told: Option<FlowFailed>,
    deadline: Option<Instant>,
    queued: bool,
}

/// The engine's running state: its lanes, which are ready, which wait for a time.
struct Lanes {
    slots: Vec<Slot>,
    ready: VecDeque<usize>,
    timers: BinaryHeap<Reverse<(Instant, usize)>>,
    live: usize,
}

impl Engine {
    /// Runs the engine on a thread of its own (`fb-data eN`), booked as
    /// data path, from `t0`; a sender's lane that would begin at or after
    /// `close` (its rank got Start late) or after a stop closes at once.
    pub fn spawn(self, t0: Instant, close: Instant, stop: Arc<AtomicBool>, book: ThreadBook) -> JoinHandle<()> {
        let name = format!("{DATA_THREAD} e{}", self.id);
        std::thread::Builder::new()
            .name(name)
            .spawn(move || {
                let _booked = book.enter(ThreadClass::Data);
                self.run(t0, close, &stop);
            })
            .expect("spawning an engine thread")
    }

    fn run(self, t0: Instant, close: Instant, stop: &AtomicBool) {
        let spin = self.seats.iter().all(|s| s.task.latency());
        // Lanes that busy-poll their own queues (RDMA shards) never wait on
        // the poll: an engine of them alone does not ask it while any is ready.
        let asks_poll = self.seats.iter().any(|s| !s.task.polls_itself());
        if let Err(e) = placement::pin_current_thread(&self.cores) {
            self.seats.iter().for_each(|s| s.end.fail(e.to_string()));
        }
        let mut poll = match Poll::new() {
            Ok(poll) => poll,
            Err(e) => {
                let why = format!("engine {} cannot poll: {e}", self.id);
                return self.seats.iter().for_each(|s| s.end.fail(why.clone()));
            }
        };
        // Allocated before t0: the loop itself allocates nothing but its timers.
        let mut events = Events::with_capacity(1024);
        let mut lanes = Lanes::register(self.seats, poll.registry());
        sleep_until(t0, stop);
        lanes.begin(stop.load(Ordering::Relaxed) || Instant::now() >= close);
        let (mut stopped, mut heard) = (false, Instant::now());
        while lanes.live > 0 {
            let stop_now = stop.load(Ordering::Relaxed);
            if stop_now && !stopped {
                // Every lane hears the stop at once, ready or not.
                stopped = true;
                (0..lanes.slots.len()).for_each(|k| lanes.queue(k));
            }
            lanes.turn(stop_now);
            if !lanes.ready.is_empty() && !asks_poll {
                // Busy lanes alone: no clock read unless a lane waits for a
                // time (clock reads are not free, least of all in a VM,
                // and a ping-pong is stepped back to back).
                if !lanes.timers.is_empty() {
                    lanes.wake_due(Instant::now());
                }
                continue;
            }
            let now = Instant::now();
            lanes.wake_due(now);
            let timeout = match lanes.ready.is_empty() {
                false => Duration::ZERO,
                true if spin && now - heard < SPIN => Duration::ZERO,
                true => lanes.next_deadline().map_or(NAP, |at| at.saturating_duration_since(now).min(NAP)),
            };
            // epoll_wait counts whole milliseconds: a shorter wait (a paced
            // lane's next token) is slept exactly, then the poll only looks.
            let timeout = match timeout < EPOLL_TICK {
                true => {
                    std::thread::sleep(timeout);
                    Duration::ZERO
                }
                false => timeout,
            };
            if let Err(e) = poll.poll(&mut events, Some(timeout)) {
                if e.kind() != std::io::ErrorKind::Interrupted {
                    let why = format!("engine {} cannot poll: {e}", self.id);
                    return lanes.fail_all(&why);
                }
            }
            for event in &events {
                heard = Instant::now();
                lanes.queue(event.token().0);
            }
        }
    }
}

impl Lanes {
    /// Registers every lane's socket; a lane that cannot be registered fails alone.
    fn register(seats: Vec<Seat>, registry: &mio::Registry) -> Lanes {
        let mut slots = Vec::with_capacity(seats.len());
        for (k, Seat { mut task, end, sender, told }) in seats.into_iter().enumerate() {
            let task = match task.register(registry, Token(k)) {
                Ok(()) => Some(task),
                Err(e) => {
                    end.fail(format!("cannot poll its stream: {e}"));
                    None
                }
            };
            slots.push(Slot { task, end, sender, told, deadline: None, queued: false });
        }
        let live = slots.iter().filter(|s| s.task.is_some()).count();
        let ready = VecDeque::with_capacity(slots.len());
        Lanes { slots, ready, timers: BinaryHeap::new(), live }
    }

    /// At t0: every lane starts, but a sender's closes when `too_late`.
    fn begin(&mut self, too_late: bool) {
        for k in 0..self.slots.len() {
            let slot = &mut self.slots[k];
            if slot.task.is_none() {
                continue;
            }
            if too_late && slot.sender {
                // Closed cleanly (EOF): its receiver may be gone, and it would
                // only write into a reset connection; reported late, not broken.
                slot.task = None;
                self.live -= 1;
                continue;
            }
            slot.end.note_start();
            self.queue(k);
        }
    }

    fn queue(&mut self, k: usize) {
        if let Some(slot) = self.slots.get_mut(k) {
            if slot.task.is_some() && !slot.queued {
                slot.queued = true;
                self.ready.push_back(k);
            }
        }
    }

    /// One turn of every lane ready when it begins.
    fn turn(&mut self, stop: bool) {
        for _ in 0..self.ready.len() {
            let Some(k) = self.ready.pop_front() else { break };
            let slot = &mut self.slots[k];
            // Stepped now: whatever it waited for came, so the timers it
            // left behind are stale (a Wait below sets its next one).
            (slot.queued, slot.deadline) = (false, None);
            let Some(task) = slot.task.as_mut() else { continue };
            match task.progress(stop) {
                Turn::Again => self.queue(k),
                Turn::Wait(deadline) => {
                    slot.deadline = deadline;
                    if let Some(at) = deadline {
                        self.timers.push(Reverse((at, k)));
                    }
                }
                Turn::Done(outcome) => {
                    if let Err(e) = outcome {
                        if let (Some(told), false) = (&slot.told, stop) {
                            told(e.to_string());
                        }
                        slot.end.fail(e.to_string());
                    }
                    self.close(k);
                }
            }
        }
    }

    /// Ends lane `k`, keeping what it measured with its end's.
    fn close(&mut self, k: usize) {
        let slot = &mut self.slots[k];
        if let Some(task) = slot.task.take() {
            if let Some(round_trips) = task.close() {
                slot.end.keep_round_trips(round_trips);
            }
            self.live -= 1;
        }
    }

    /// Queues the lanes whose deadline has come (stale timers are dropped on the way).
    fn wake_due(&mut self, now: Instant) {
        while self.next_deadline().is_some_and(|at| at <= now) {
            if let Some(Reverse((_, k))) = self.timers.pop() {
                self.slots[k].deadline = None;
                self.queue(k);
            }
        }
    }

    /// The earliest deadline a lane still waits for: stale timers (their
    /// lane was stepped since) are dropped here, so the engine never wakes
    /// for them. An event-mode lane leaves one behind per message.
    fn next_deadline(&mut self) -> Option<Instant> {
        while let Some(&Reverse((at, k))) = self.timers.peek() {
            if self.slots[k].deadline == Some(at) {
                return Some(at);
            }
            self.timers.pop();
        }
        None
    }

    fn fail_all(&mut self, why: &str) {
        for k in 0..self.slots.len() {
            if self.slots[k].task.is_some() {
                self.slots[k].end.fail(why.to_string());
                self.close(k);
            }
        }
    }
}

#[cfg(test)]
#[path = "engine_tests.rs"]
mod tests;
