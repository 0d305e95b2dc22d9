#![no_main]
amber_fuzz::target!(open_and_read);
