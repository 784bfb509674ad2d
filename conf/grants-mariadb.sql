-- The account binlog-cdc connects with, on MariaDB 10.5.2 and later (10.11, 11.x).
-- docs/server-setup.md says what each privilege is for. Change the password, and name your
-- databases in the SELECT grant.
CREATE USER IF NOT EXISTS 'cdc'@'%' IDENTIFIED BY 'change-me';
GRANT REPLICATION SLAVE, BINLOG MONITOR, REPLICATION MASTER ADMIN ON *.* TO 'cdc'@'%';
GRANT SELECT ON shop.* TO 'cdc'@'%';
