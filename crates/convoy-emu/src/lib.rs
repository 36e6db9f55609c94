//! `convoy emu`: unmodified programs over emulated links.
//!
//! The kernel this runs on may have no netem, and vehicles have several
//! interfaces, so the emulator is a user-space program: a client and a
//! server network namespace, joined by one pair of TUN devices per link,
//! whose packets this process carries through a [`convoy_link::LinkDirection`]
//! per direction on the OS clock. The same link model drives the simulator,
//! so a loss pattern seen here replays there from the same seed.
//!
//! * [`spec`]: the `--link NAME:KEY=VALUE,...` syntax and what it builds.
//! * [`netns`], [`tun`]: anonymous namespaces and TUN devices; nothing
//!   outlives the process that holds them.
//! * [`ap`]: the smart access point (SAP-LAW, RTT-fair SAP-LAW, VoAP),
//!   which rewrites TCP receive windows in the packets it forwards; it
//!   reads them with [`packet`].
//! * [`pump`]: one thread per link direction, the timing-critical part.
//! * [`emulator`]: setup, addressing, commands in the namespaces, teardown.
//! * [`ifdown`], [`netlink`]: `outage-policy=down`, interfaces that go
//!   down during outages and come back as they were.
//! * [`pcap`]: the optional pcapng capture.
//! * [`selftest`]: the accuracy measurements behind `convoy emu selftest`.
//!
//! docs/EMU.md is the user's reference.

pub mod ap;
pub mod emulator;
pub mod error;
pub mod ifdown;
pub mod keep_awake;
pub mod netlink;
pub mod netns;
pub mod packet;
pub mod pcap;
pub mod pump;
pub mod selftest;
pub mod spec;
pub mod tun;

pub use emulator::{check_environment, EmuConfig, Emulator, LinkInfo, Side, MAX_LINKS};
pub use error::{EmuError, SpecError};
pub use ifdown::IfaceEvent;
pub use netns::Netns;
pub use pump::DirectionReport;
pub use spec::{parse_duration, LinkSpec};
