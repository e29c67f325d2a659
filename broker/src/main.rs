//! `spool`: the broker (`spool serve`) and its command-line tools.

use clap::{Parser, Subcommand};
use spool_broker::cli::{self, Brokers, ConsumeArgs, ProduceArgs, TopicCmd};
use spool_broker::config::{BrokerConfig, ServeArgs};

/// Very large allocations reserve address space only, so a frame claiming billions of array
/// elements cannot abort the broker (see `spool_broker::alloc`).
#[global_allocator]
static ALLOCATOR: spool_broker::alloc::ReserveLargeAllocator =
    spool_broker::alloc::ReserveLargeAllocator;

#[derive(Parser)]
#[command(name = "spool", version, about = "spool: a Kafka-class message queue")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    brokers: Brokers,
}

#[derive(Subcommand)]
enum Command {
    /// Run a broker (zero config: ./spool-data, every core, 127.0.0.1).
    Serve(Box<ServeArgs>),
    /// Create, delete, list and describe topics.
    #[command(subcommand)]
    Topic(TopicCmd),
    /// Produce one record per stdin line.
    Produce(ProduceArgs),
    /// Print records of a topic.
    Consume(ConsumeArgs),
    /// Cluster commands.
    #[command(subcommand)]
    Cluster(ClusterCmd),
    /// Consumer groups: list, describe (members, offsets, lag), reset offsets.
    #[command(subcommand)]
    Group(cli::group::GroupCmd),
    /// Transactions: list transactional ids, describe one (state, producer, partitions).
    #[command(subcommand)]
    Txn(cli::txn::TxnCmd),
}

#[derive(Subcommand)]
enum ClusterCmd {
    /// Brokers and topics.
    Info,
    /// Run a real N-broker cluster here: 127.0.0.1..N, racks a, b, c, …; Ctrl-C stops it.
    Local(spool_broker::cli_cluster_local::LocalArgs),
}

/// The administrative commands print for a pipe (`spool consume … | head`): when the reader
/// goes away they should end quietly, as Unix tools do, rather than panic on a failed print.
/// Rust ignores SIGPIPE by default; the default action is restored for those commands only — a
/// broker keeps ignoring it (a client that hangs up mid-write is an error on that connection).
fn end_quietly_on_closed_pipe() {
    // SAFETY: `signal` with SIG_DFL installs no handler; it is called before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() {
    let cli = Cli::parse();
    if !matches!(
        cli.command,
        Command::Serve(_) | Command::Cluster(ClusterCmd::Local(_))
    ) {
        end_quietly_on_closed_pipe();
    }
    let result = match cli.command {
        Command::Serve(args) => {
            // Before any executor allocates (`spool_broker::alloc`'s reasons).
            let kept = spool_broker::alloc::keep_freed_memory();
            tracing_subscriber::fmt()
                .with_env_filter(
                    tracing_subscriber::EnvFilter::try_from_default_env()
                        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
                )
                .with_writer(std::io::stderr)
                .init();
            if !kept {
                tracing::debug!("glibc's allocator settings unchanged (not glibc, or refused)");
            }
            BrokerConfig::from_args(&args).and_then(spool_broker::runtime::serve)
        }
        Command::Topic(cmd) => cli::topic(&cli.brokers, cmd),
        Command::Produce(a) => cli::produce(&cli.brokers, a),
        Command::Consume(a) => cli::consume(&cli.brokers, a),
        Command::Cluster(ClusterCmd::Info) => cli::cluster_info(&cli.brokers),
        Command::Cluster(ClusterCmd::Local(a)) => spool_broker::cli_cluster_local::run(a),
        Command::Group(cmd) => cli::group::group(&cli.brokers, cmd),
        Command::Txn(cmd) => cli::txn::txn(&cli.brokers, cmd),
    };
    if let Err(e) = result {
        eprintln!("spool: {e}");
        std::process::exit(1);
    }
}
