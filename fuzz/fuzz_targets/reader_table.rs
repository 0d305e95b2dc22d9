#![no_main]
amber_fuzz::target!(reader_table);
