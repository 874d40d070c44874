// A Go program calling cp_logTS through cgo from many goroutines: Go's
// scheduler moves goroutines between its threads, starts threads as calls
// block, and preempts them with SIGURG (the signal the recorder's hello
// borrows, docs/record.md). Goroutine g logs tuples g*1e9 + k, k < events, on
// channel "go.log", then the program prints {"total": N}.
package main

// #include <stdint.h>
// #include <stdlib.h>
// #include "cptrace.h"
import "C"

import (
	"flag"
	"fmt"
	"runtime"
	"sync"
	"unsafe"
)

func main() {
	goroutines := flag.Int("goroutines", 64, "goroutines logging at once")
	events := flag.Int("events", 2500, "events per goroutine")
	flag.Parse()
	name := C.CString("go.log")
	ch := C.cp_open_channel(name)
	C.free(unsafe.Pointer(name))
	var wg sync.WaitGroup
	for g := 0; g < *goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for k := 0; k < *events; k++ {
				C.cp_logTS(ch, C.uint64_t(uint64(g)*1000000000+uint64(k)))
				if k%100 == 0 {
					runtime.Gosched() // let the scheduler move this goroutine
				}
			}
		}(g)
	}
	wg.Wait()
	fmt.Printf("{\"total\":%d}\n", *goroutines**events)
}
