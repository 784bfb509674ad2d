-- The account binlog-cdc connects with, on MySQL 8.0, 8.4 and 9.x (and MariaDB before 10.5.2).
-- docs/server-setup.md says what each privilege is for. Change the password, and name your
-- databases in the SELECT grant.
CREATE USER IF NOT EXISTS 'cdc'@'%' IDENTIFIED BY 'change-me';
GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'cdc'@'%';
GRANT SELECT ON shop.* TO 'cdc'@'%';
