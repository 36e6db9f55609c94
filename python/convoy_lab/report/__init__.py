"""What a reader sees: text tables for the terminal, plots (PNG) and the
self-contained HTML report (`html`)."""
