"""Running programs over `convoy emu`: link scenarios, the transports compared
(schemes) behind one interface, one run as one row, sweeps of runs, and the
small senders, receivers and wrappers those runs start inside the emulator."""
