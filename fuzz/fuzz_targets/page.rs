#![no_main]
amber_fuzz::target!(page);
