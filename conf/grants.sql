-- The account binlog-cdc connects with (change the password).
CREATE USER IF NOT EXISTS 'cdc'@'%' IDENTIFIED BY 'change-me';
-- MySQL 8.x and MariaDB alike: read the binlog, see the binlog list, read table definitions.
GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO 'cdc'@'%';
-- MariaDB 10.5+ splits REPLICATION CLIENT; SHOW BINARY LOGS needs BINLOG MONITOR there:
-- GRANT BINLOG MONITOR ON *.* TO 'cdc'@'%';
