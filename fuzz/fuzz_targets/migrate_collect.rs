#![no_main]
amber_fuzz::target!(migrate_collect);
