//! Faults a broker must shrug off, by kind: [`bad_input`] on a live connection, [`slow_clients`]
//! (half frames, idle connections), [`conn_limits`] (connections past the limits),
//! [`request_memory`] (large unfinished frames against the memory budget),
//! [`response_memory`] (large fetches never read, against the response budget), and
//! [`lifecycle`] — rivals for its data directory and ports, restarts right after a stop or a
//! crash. One test binary (one link), one file per kind.

mod bad_input;
mod conn_limits;
mod disk_full;
mod lifecycle;
mod request_memory;
mod response_memory;
mod slow_clients;
