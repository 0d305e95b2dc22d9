#![no_main]
amber_fuzz::target!(log_header);
