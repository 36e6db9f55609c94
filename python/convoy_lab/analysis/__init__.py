"""An experiment's rows turned into its figures and target checks (numbers,
not pictures: those are in `report`)."""
