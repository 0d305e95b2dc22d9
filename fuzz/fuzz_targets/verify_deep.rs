#![no_main]
amber_fuzz::target!(verify_deep);
