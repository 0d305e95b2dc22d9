#![no_main]
amber_fuzz::target!(schema_file);
