//! The async consumer's heartbeat task and the turns it takes with the application's calls.
//!
//! The two cores (fetching consumer and group member) live in one `RefCell`, borrowed only
//! between `.await`s; the connections ([`AsyncNet`]) are handed over by value: whoever drives the
//! network takes them out of their slot and puts them back when done ([`NetTurn`] does so on
//! drop, also when the application's future is dropped half-way). [`step`] is `AsyncNet::step`
//! cut at its `.await`s for that reason.
//!
//! The application always goes first: [`Shared::take_net`] announces it and wakes the heartbeat
//! task out of its network wait; the task takes the connections only while no application call
//! waits or runs, runs the member's background duty ([`Away`]), and waits on the network at most
//! [`AWAY_WAIT_MAX_MS`] per step.

use std::cell::{Cell, RefCell};
use std::ops::{Deref, DerefMut};
use std::rc::Rc;
use std::time::Duration;

use glommio::channels::local_channel::LocalSender;
use glommio::sync::Semaphore;

use crate::client::consumer::ConsumerCore;
use crate::client::group::both::{Away, Both};
use crate::client::group::listener::EventSink;
use crate::client::group::{GroupCore, RebalanceListener};
use crate::client::net::ClientCore;
use crate::client::ClientError;

use super::net::{now_ms, AsyncNet, Event};

/// Longest one background step waits on the network before the task looks whether the
/// application wants its turn (the application also wakes it at once; this bounds a miss).
pub(crate) const AWAY_WAIT_MAX_MS: u64 = 100;

pub(crate) struct Membership {
    pub core: GroupCore,
    pub listener: Box<dyn RebalanceListener>,
    pub sink: EventSink,
}

pub(crate) struct Cores {
    pub core: ConsumerCore,
    pub group: Option<Membership>,
}

impl Cores {
    /// The group's events applied to the fetching core and the listener.
    pub(crate) fn apply_events(&mut self) -> Result<(), ClientError> {
        let Some(g) = self.group.as_mut() else {
            return Ok(());
        };
        let events = g.core.take_events();
        g.sink.apply(events, &mut self.core, g.listener.as_mut());
        match &g.sink.fatal {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// The pair as the network sees it: both cores in full (`away: false`), or the member's
    /// background duty only (`None` without a group).
    fn driven(&mut self, away: bool) -> Option<Box<dyn ClientCore + '_>> {
        let group = self.group.as_mut().map(|g| &mut g.core);
        match (away, group) {
            (false, group) => Some(Box::new(Both {
                consumer: &mut self.core,
                group,
            })),
            (true, Some(group)) => Some(Box::new(Away {
                consumer: &mut self.core,
                group,
            })),
            (true, None) => None,
        }
    }
}

pub(crate) struct Shared {
    pub cores: RefCell<Cores>,
    net: RefCell<Option<AsyncNet>>,
    wake: Rc<LocalSender<Event>>,
    /// Application calls waiting for the connections or using them.
    app: Cell<usize>,
    stopped: Cell<bool>,
    /// Signalled when the connections go back while an application call waits.
    returned: Semaphore,
}

/// A turn at the connections, until dropped (which puts them back).
pub(crate) struct NetTurn {
    net: Option<AsyncNet>,
    shared: Rc<Shared>,
    app: bool,
}

impl Deref for NetTurn {
    type Target = AsyncNet;
    fn deref(&self) -> &AsyncNet {
        // Some until drop.
        self.net
            .as_ref()
            .expect("a turn holds the connections until dropped")
    }
}

impl DerefMut for NetTurn {
    fn deref_mut(&mut self) -> &mut AsyncNet {
        self.net
            .as_mut()
            .expect("a turn holds the connections until dropped")
    }
}

impl Drop for NetTurn {
    fn drop(&mut self) {
        if let Some(net) = self.net.take() {
            *self.shared.net.borrow_mut() = Some(net);
        }
        if self.app {
            self.shared.app.set(self.shared.app.get() - 1);
        }
        // Only an application call waits on it; permits signalled to nobody would pile up.
        if self.shared.app.get() > 0 {
            self.shared.returned.signal(1);
        }
    }
}

impl Shared {
    pub(crate) fn new(cores: Cores, net: AsyncNet) -> Rc<Self> {
        let wake = net.waker();
        Rc::new(Self {
            cores: RefCell::new(cores),
            net: RefCell::new(Some(net)),
            wake,
            app: Cell::new(0),
            stopped: Cell::new(false),
            returned: Semaphore::new(0),
        })
    }

    /// The application's turn at the connections (the heartbeat task waits meanwhile).
    pub(crate) async fn take_net(self: &Rc<Self>) -> NetTurn {
        self.app.set(self.app.get() + 1);
        // Counted from here on, so that a drop while waiting still uncounts it.
        let mut turn = NetTurn {
            net: None,
            shared: Rc::clone(self),
            app: true,
        };
        loop {
            let taken = self.net.borrow_mut().take();
            if let Some(net) = taken {
                turn.net = Some(net);
                return turn;
            }
            // Full: the heartbeat task has events to read anyway, so its wait ends at once.
            let _ = self.wake.try_send(Event::Wake);
            let _ = self.returned.acquire(1).await;
        }
    }

    /// The heartbeat task: the member's background duty whenever no application call waits
    /// or runs. Dropping the task stops it.
    pub(crate) fn spawn_heartbeat(self: &Rc<Self>) -> glommio::Task<()> {
        let shared = Rc::clone(self);
        glommio::spawn_local(async move {
            while !shared.stopped.get() {
                let taken = if shared.app.get() == 0 {
                    shared.net.borrow_mut().take()
                } else {
                    None
                };
                let Some(net) = taken else {
                    glommio::timer::sleep(Duration::from_millis(AWAY_WAIT_MAX_MS)).await;
                    continue;
                };
                let mut turn = NetTurn {
                    net: Some(net),
                    shared: Rc::clone(&shared),
                    app: false,
                };
                step(
                    &shared.cores,
                    &mut turn,
                    true,
                    Duration::from_millis(AWAY_WAIT_MAX_MS),
                )
                .await;
                drop(turn);
            }
        })
    }

    /// Ends the heartbeat task at its next look.
    pub(crate) fn stop(&self) {
        self.stopped.set(true);
        let _ = self.wake.try_send(Event::Wake);
    }
}

/// One network round: act on what the cores want now, then wait (at most `max_wait`, at most
/// until their next wake-up) for one event and dispatch it. The cores are borrowed only between
/// the `.await`s.
pub(crate) async fn step(
    cores: &RefCell<Cores>,
    net: &mut AsyncNet,
    away: bool,
    max_wait: Duration,
) {
    let actions = match cores.borrow_mut().driven(away) {
        Some(mut c) => c.poll_actions(now_ms()),
        None => return,
    };
    let failed = net.execute(actions).await;
    let wait = {
        let mut c = cores.borrow_mut();
        let Some(mut driven) = c.driven(away) else {
            return;
        };
        for addr in failed {
            driven.on_disconnect(&addr, now_ms());
        }
        let now = now_ms();
        crate::client::blocking::wait_until_ms(driven.next_wakeup_ms(now), max_wait)
    };
    if let Some(ev) = net.recv(wait).await {
        let mut c = cores.borrow_mut();
        if let Some(mut driven) = c.driven(away) {
            net.dispatch(ev, driven.as_mut(), now_ms());
        };
    }
}
