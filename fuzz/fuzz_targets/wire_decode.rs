#![no_main]
amber_fuzz::target!(wire_decode);
