// Command broken does not compile; firmware build tests use it.
package main

func main() {
	undefinedFunction()
}
