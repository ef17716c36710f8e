//! stateright model of kprod-core (work in progress).
