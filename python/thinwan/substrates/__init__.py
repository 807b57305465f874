"""Stage 4, substrates: where a scenario runs — the simulator (:mod:`.sim`, through
``thinwan._native``) and the namespace lab (:mod:`.lab`); :mod:`.binaries` finds the
Rust programs both lab and tunnel need."""
