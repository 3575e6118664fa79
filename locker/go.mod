module github.com/lockbench/lockbench/locker

go 1.22
