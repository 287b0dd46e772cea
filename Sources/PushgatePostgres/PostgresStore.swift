// The PostgreSQL store (issue #6): placeholder until it lands.
