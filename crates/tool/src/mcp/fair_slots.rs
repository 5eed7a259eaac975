//! Call slots shared fairly by the sessions of one server: `limits.concurrency` slots,
//! and a queue per session for the calls that wait.
//!
//! The rule: a call takes a free slot at once when no call waits. Otherwise it waits in
//! its session's queue, and each slot that comes free goes to the waiting session that
//! holds the fewest slots now; among sessions that hold as many, to the one last given a
//! slot longest ago (sessions are served in turn, not in the order their calls arrived).
//! So no session holds more than its share of the slots while another session waits
//! for longer than one running call takes: a session that arrives while another holds
//! every slot gets the next slot that comes free, and as calls end the slots even out
//! across the sessions that want them. A running call is never stopped for another. A
//! call waits only within its own deadline (its caller drops the wait then), and a wait
//! given up leaves the queue at once.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::oneshot;

/// What an arriving call got: a slot now, or a place in its session's queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arrival {
    /// A slot is the call's now.
    Granted,
    /// The call waits, under this ticket.
    Queued(u64),
}

/// The bookkeeping of the slots, without any waiting (see the module documentation).
#[derive(Debug)]
pub(crate) struct Scheduler<K> {
    free: usize,
    running: HashMap<K, usize>,
    queues: HashMap<K, VecDeque<u64>>,
    /// The sessions with waiting calls, in the order they started waiting.
    turn: VecDeque<K>,
    /// When each session with calls running or waiting was last given a slot.
    served_at: HashMap<K, u64>,
    clock: u64,
    next_ticket: u64,
}

impl<K: Eq + Hash + Clone> Scheduler<K> {
    /// `capacity` slots (at least one), all free.
    pub(crate) fn new(capacity: usize) -> Self {
        Scheduler {
            free: capacity.max(1),
            running: HashMap::new(),
            queues: HashMap::new(),
            turn: VecDeque::new(),
            served_at: HashMap::new(),
            clock: 0,
            next_ticket: 0,
        }
    }

    /// A call of session `key` arrives.
    pub(crate) fn arrive(&mut self, key: K) -> Arrival {
        if self.free > 0 && self.turn.is_empty() {
            self.grant(key);
            return Arrival::Granted;
        }
        let ticket = self.next_ticket;
        self.next_ticket = self.next_ticket.wrapping_add(1);
        let queue = self.queues.entry(key.clone()).or_default();
        if queue.is_empty() {
            self.turn.push_back(key);
        }
        queue.push_back(ticket);
        Arrival::Queued(ticket)
    }

    /// The waiting call `ticket` of `key` gives up; `false` when it is not waiting (it
    /// was granted a slot already).
    pub(crate) fn cancel(&mut self, key: &K, ticket: u64) -> bool {
        let Some(queue) = self.queues.get_mut(key) else {
            return false;
        };
        let Some(at) = queue.iter().position(|t| *t == ticket) else {
            return false;
        };
        queue.remove(at);
        if queue.is_empty() {
            self.queues.remove(key);
            self.turn.retain(|k| k != key);
            self.forget_if_idle(key);
        }
        true
    }

    /// Gives a slot to a call of `key`.
    fn grant(&mut self, key: K) {
        self.free -= 1;
        self.clock += 1;
        self.served_at.insert(key.clone(), self.clock);
        *self.running.entry(key).or_default() += 1;
    }

    /// Forgets when `key` was served once it has nothing running or waiting, so that
    /// what is kept is bounded by the calls.
    fn forget_if_idle(&mut self, key: &K) {
        if !self.running.contains_key(key) && !self.queues.contains_key(key) {
            self.served_at.remove(key);
        }
    }

    /// A slot of `key` comes free; returns the waiting calls granted a slot now.
    pub(crate) fn release(&mut self, key: &K) -> Vec<(K, u64)> {
        if let Some(n) = self.running.get_mut(key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.running.remove(key);
                self.forget_if_idle(key);
            }
            self.free += 1;
        }
        let mut granted = Vec::new();
        while self.free > 0 {
            let Some(at) = self.next_served() else { break };
            let Some(key) = self.turn.remove(at) else {
                break;
            };
            let Some(queue) = self.queues.get_mut(&key) else {
                continue;
            };
            let Some(ticket) = queue.pop_front() else {
                continue;
            };
            if queue.is_empty() {
                self.queues.remove(&key);
            } else {
                self.turn.push_back(key.clone());
            }
            self.grant(key.clone());
            granted.push((key, ticket));
        }
        granted
    }

    /// The place in `turn` of the session served next: the fewest slots held; among
    /// equals, the one given a slot longest ago (never, first), then the one waiting
    /// longest.
    fn next_served(&self) -> Option<usize> {
        let held = |key: &K| self.running.get(key).copied().unwrap_or(0);
        let served = |key: &K| self.served_at.get(key).copied().unwrap_or(0);
        self.turn
            .iter()
            .enumerate()
            .min_by_key(|(at, key)| (held(key), served(key), *at))
            .map(|(at, _)| at)
    }

    /// The slots `key` holds now.
    #[cfg(test)]
    pub(crate) fn held(&self, key: &K) -> usize {
        self.running.get(key).copied().unwrap_or(0)
    }

    /// The calls waiting now.
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> usize {
        self.queues.values().map(VecDeque::len).sum()
    }

    /// The slots free now.
    #[cfg(test)]
    pub(crate) fn free(&self) -> usize {
        self.free
    }
}

/// The slots of a server and the calls waiting for them; clones share them.
#[derive(Debug)]
pub(crate) struct FairSlots<K> {
    inner: Arc<Mutex<Inner<K>>>,
}

impl<K> Clone for FairSlots<K> {
    fn clone(&self) -> Self {
        FairSlots {
            inner: self.inner.clone(),
        }
    }
}

#[derive(Debug)]
struct Inner<K> {
    scheduler: Scheduler<K>,
    wake: HashMap<u64, oneshot::Sender<()>>,
    /// The package the slots serve, as metrics name it.
    package: String,
    capacity: usize,
}

impl<K: Eq + Hash + Clone> Inner<K> {
    /// Reports the slots busy and the calls waiting now.
    fn report(&self) {
        let free = self.scheduler.free;
        let waiting = self.scheduler.queues.values().map(VecDeque::len).sum();
        crate::metrics::global().slots(
            &self.package,
            self.capacity,
            self.capacity.saturating_sub(free),
            waiting,
        );
    }
}

/// A slot held by one call of session `key`; it comes free when dropped.
#[derive(Debug)]
pub(crate) struct Slot<K: Eq + Hash + Clone> {
    slots: FairSlots<K>,
    key: K,
}

/// A wait for a slot: gives its place up, or the slot it was just granted, when dropped
/// before it became a [`Slot`].
struct Waiting<K: Eq + Hash + Clone> {
    slots: FairSlots<K>,
    key: K,
    ticket: u64,
    done: bool,
}

impl<K: Eq + Hash + Clone> FairSlots<K> {
    /// `capacity` slots (at least one) of `package`'s calls.
    pub(crate) fn new(capacity: usize, package: &str) -> Self {
        let inner = Inner {
            scheduler: Scheduler::new(capacity),
            wake: HashMap::new(),
            package: package.to_owned(),
            capacity: capacity.max(1),
        };
        inner.report();
        FairSlots {
            inner: Arc::new(Mutex::new(inner)),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<K>> {
        // The bookkeeping stays whole under a panic elsewhere: every change is done
        // before the lock is let go.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A slot for a call of session `key`, once the rule gives it one. Dropping the
    /// future gives the place up.
    pub(crate) async fn acquire(&self, key: K) -> Slot<K> {
        let (ticket, woken) = {
            let mut inner = self.lock();
            let arrival = inner.scheduler.arrive(key.clone());
            inner.report();
            match arrival {
                Arrival::Granted => {
                    return Slot {
                        slots: self.clone(),
                        key,
                    };
                }
                Arrival::Queued(ticket) => {
                    crate::metrics::global().slot_wait(&inner.package);
                    let (tx, rx) = oneshot::channel();
                    inner.wake.insert(ticket, tx);
                    (ticket, rx)
                }
            }
        };
        let mut waiting = Waiting {
            slots: self.clone(),
            key: key.clone(),
            ticket,
            done: false,
        };
        // The sender is kept until the ticket is granted (or given up by this wait).
        let _woken = woken.await;
        waiting.done = true;
        Slot {
            slots: self.clone(),
            key,
        }
    }

    /// Frees one slot of `key` and wakes the calls granted one.
    fn release(&self, key: &K) {
        let mut inner = self.lock();
        for (_, ticket) in inner.scheduler.release(key) {
            if let Some(wake) = inner.wake.remove(&ticket) {
                // A wait dropped meanwhile gives the slot back itself (`Waiting`).
                let _woken = wake.send(());
            }
        }
        inner.report();
    }

    /// The slots free and the calls waiting now.
    #[cfg(test)]
    pub(crate) fn load(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.scheduler.free(), inner.scheduler.waiting())
    }
}

impl<K: Eq + Hash + Clone> Drop for Slot<K> {
    fn drop(&mut self) {
        self.slots.release(&self.key);
    }
}

impl<K: Eq + Hash + Clone> Drop for Waiting<K> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let given_up = {
            let mut inner = self.slots.lock();
            inner.wake.remove(&self.ticket);
            let given_up = inner.scheduler.cancel(&self.key, self.ticket);
            inner.report();
            given_up
        };
        if !given_up {
            // Granted just before the wait was dropped: the slot goes on.
            self.slots.release(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::time::Duration;

    /// One step of a generated run: a call of a session arrives, a running call of a
    /// session ends, or a waiting call of a session gives up.
    #[derive(Debug, Clone)]
    enum Step {
        Arrive(u8),
        End(u8),
        GiveUp(u8),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            3 => (0..5_u8).prop_map(Step::Arrive),
            2 => (0..5_u8).prop_map(Step::End),
            1 => (0..5_u8).prop_map(Step::GiveUp),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1_000))]

        /// Over generated arrival orders: no slot is lost or made up, nothing waits
        /// while a slot is free, every slot that comes free goes to a waiting session
        /// holding the fewest slots, and a session holding none that waits is served
        /// at the next slot that comes free.
        #[test]
        fn slots_go_to_the_waiting_session_that_holds_fewest(
            capacity in 1..5_usize,
            steps in proptest::collection::vec(step(), 1..200),
        ) {
            let mut s = Scheduler::new(capacity);
            let mut waiting: HashMap<u8, VecDeque<u64>> = HashMap::new();
            for step in steps {
                let before: HashMap<u8, usize> = (0..5).map(|k| (k, s.held(&k))).collect();
                let waiting_before: Vec<u8> = waiting
                    .iter()
                    .filter(|(_, q)| !q.is_empty())
                    .map(|(k, _)| *k)
                    .collect();
                let granted = match step {
                    Step::Arrive(k) => match s.arrive(k) {
                        Arrival::Granted => {
                            prop_assert!(waiting_before.is_empty());
                            Vec::new()
                        }
                        Arrival::Queued(t) => {
                            waiting.entry(k).or_default().push_back(t);
                            Vec::new()
                        }
                    },
                    Step::End(k) => {
                        if s.held(&k) == 0 {
                            continue;
                        }
                        s.release(&k)
                    }
                    Step::GiveUp(k) => {
                        let Some(t) = waiting.get_mut(&k).and_then(VecDeque::pop_back) else {
                            continue;
                        };
                        prop_assert!(s.cancel(&k, t));
                        Vec::new()
                    }
                };
                // One slot came free at most: at most one grant, to the waiting session
                // that holds the fewest slots once the ending call let its slot go.
                prop_assert!(granted.len() <= 1);
                if let (Step::End(ended), Some((k, t))) = (&step, granted.first()) {
                    let mut held = before.clone();
                    *held.get_mut(ended).unwrap() -= 1;
                    prop_assert_eq!(waiting.get_mut(k).and_then(VecDeque::pop_front), Some(*t));
                    let fewest = waiting_before.iter().map(|w| held[w]).min();
                    prop_assert_eq!(Some(held[k]), fewest, "granted to {} over a session holding fewer", k);
                } else if let Step::End(_) = step {
                    prop_assert!(waiting_before.is_empty(), "a slot came free and nobody was served");
                }
                let total: usize = (0..5).map(|k| s.held(&k)).sum();
                prop_assert_eq!(total + s.free(), capacity);
                let still_waiting: usize = waiting.values().map(VecDeque::len).sum();
                prop_assert_eq!(still_waiting, s.waiting());
                prop_assert!(still_waiting == 0 || s.free() == 0);
            }
        }
    }

    #[test]
    fn among_equals_sessions_are_served_in_turn_not_in_arrival_order() {
        let mut s = Scheduler::new(1);
        assert_eq!(s.arrive('a'), Arrival::Granted);
        // a queues three calls before b and c queue one each.
        for key in ['a', 'a', 'a', 'b', 'c'] {
            assert!(matches!(s.arrive(key), Arrival::Queued(_)));
        }
        let mut served = Vec::new();
        let mut running = 'a';
        for _ in 0..5 {
            let granted = s.release(&running);
            assert_eq!(granted.len(), 1);
            running = granted[0].0;
            served.push(running);
        }
        assert_eq!(served, ['b', 'c', 'a', 'a', 'a']);
    }

    #[tokio::test]
    async fn a_wait_given_up_leaves_its_place_and_a_granted_slot_goes_on() {
        let slots = FairSlots::new(1, "test");
        let held = slots.acquire(1_u8).await;
        // A wait of session 2 given up (its deadline passed) leaves the queue.
        let gave_up = tokio::time::timeout(Duration::from_millis(20), slots.acquire(2)).await;
        assert!(gave_up.is_err());
        assert_eq!(slots.load(), (0, 0));
        let third = tokio::spawn({
            let slots = slots.clone();
            async move {
                let slot = slots.acquire(3).await;
                drop(slot);
            }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(slots.load(), (0, 1));
        drop(held);
        third.await.unwrap();
        assert_eq!(slots.load(), (1, 0));
    }
}
