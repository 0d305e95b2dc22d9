#![no_main]
amber_fuzz::target!(root_directory);
