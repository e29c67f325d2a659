//! Cutting links between brokers on loopback with iptables (root only), for partition tests.
//!
//! A [`Cut`] owns one iptables chain of its own (`spool-test-<pid>-<n>`), jumped to from
//! `OUTPUT` (every loopback packet passes it once), holding DROP rules for the TCP traffic
//! between two brokers' addresses on their internal ports — raft, controller calls and replica
//! fetches — in both directions. Clients' connections (other ports) are untouched. Brokers bind
//! their outgoing internal connections to their own address, so a rule naming two addresses cuts
//! exactly that link. Dropping the `Cut` (or [`Cut::heal`]) removes the jump and the chain, also
//! when the test panics.
//!
//! [`Cut::available`] says whether this process can use iptables at all; tests that need it
//! skip with a message when it cannot (not root, no iptables binary).

use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

static NEXT_CHAIN: AtomicUsize = AtomicUsize::new(0);

/// One broker's end of a link: its address and internal port.
#[derive(Debug, Clone, Copy)]
pub struct Endpoint {
    pub ip: Ipv4Addr,
    pub internal_port: u16,
}

/// Links cut while this lives (module docs).
pub struct Cut {
    chain: String,
    healed: bool,
}

fn iptables(args: &[&str]) -> Result<(), String> {
    let out = Command::new("iptables")
        .args(["-w", "5"])
        .args(args)
        .output()
        .map_err(|e| format!("running iptables: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "iptables {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

impl Cut {
    /// Whether iptables can be used here; the reason when not.
    pub fn available() -> Result<(), String> {
        iptables(&["-L", "OUTPUT", "-n"])
    }

    /// Cuts every link between `isolated` and each of `others`.
    pub fn isolate(isolated: Endpoint, others: &[Endpoint]) -> Result<Cut, String> {
        let cut = Self::new_chain()?;
        for o in others {
            cut.drop_from_to(isolated, *o)?;
            cut.drop_from_to(*o, isolated)?;
        }
        Ok(cut)
    }

    /// Cuts one direction of one link: nothing `from` sends reaches `to` on either internal
    /// port (its requests, its answers), while `to`'s packets still reach `from`. (TCP needs
    /// both directions, so connections across the link stall either way; what differs is who
    /// still hears whom — a heartbeat or a vote request gets through one way only.)
    pub fn one_way(from: Endpoint, to: Endpoint) -> Result<Cut, String> {
        let cut = Self::new_chain()?;
        cut.drop_from_to(from, to)?;
        Ok(cut)
    }

    /// A chain of this process's own, jumped to from OUTPUT, holding nothing yet.
    fn new_chain() -> Result<Cut, String> {
        let chain = format!(
            "spool-test-{}-{}",
            std::process::id(),
            NEXT_CHAIN.fetch_add(1, Ordering::SeqCst)
        );
        iptables(&["-N", &chain])?;
        let cut = Cut {
            chain,
            healed: false,
        };
        iptables(&["-I", "OUTPUT", "-j", &cut.chain])?;
        Ok(cut)
    }

    /// DROPs every packet from `a` to `b` on either one's internal port: a's requests to b's
    /// internal port and a's answers from its own.
    fn drop_from_to(&self, a: Endpoint, b: Endpoint) -> Result<(), String> {
        for (port, side) in [(b.internal_port, "--dport"), (a.internal_port, "--sport")] {
            let (from, to, port) = (a.ip.to_string(), b.ip.to_string(), port.to_string());
            iptables(&[
                "-A",
                &self.chain,
                "-p",
                "tcp",
                "-s",
                &from,
                "-d",
                &to,
                side,
                &port,
                "-j",
                "DROP",
            ])?;
        }
        Ok(())
    }

    /// Restores the links.
    pub fn heal(mut self) {
        self.remove();
    }

    fn remove(&mut self) {
        if self.healed {
            return;
        }
        self.healed = true;
        // Every step is tried even if one fails, so nothing is left behind that can be removed.
        let _ = iptables(&["-D", "OUTPUT", "-j", &self.chain]);
        let _ = iptables(&["-F", &self.chain]);
        let _ = iptables(&["-X", &self.chain]);
    }
}

impl Drop for Cut {
    fn drop(&mut self) {
        self.remove();
    }
}
