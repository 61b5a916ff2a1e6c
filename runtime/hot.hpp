// URT_HOT: marks a function on the path every task takes: its spawn (from
// another thread or from a task), the hand-off, the worker's wake-up, its
// step and the run, and the way back to idle.
//
// Why: GCC puts a function with the hot attribute in .text.hot, and GNU ld
// (the system linker here) and gold place every object's .text.hot
// together, so the path spans a few pages of code instead of the whole
// library's text (lld does so only with -z keep-text-section-prefix). A
// wake-up after an idle stretch finds the instruction cache and the TLB
// cold (the CPU ran other threads meanwhile), and a TLB miss in a
// virtual machine is a two-level page walk: on the 2-core VM the path's
// code lay on 21 pages, in .text.hot on 12, and the user-space part of an
// idle wake-up (the spawn's call to its futex wake, plus the worker's
// return from its futex wait to the task's first line) took 1.4-2.9 us
// less at the median (bench/README.md, "urt-peers (b): the wake-up path's
// code, together"). The attribute also optimizes the function for speed
// over size.
//
// Only on definitions in runtime/*.cpp: a function inlined into its
// callers has no section of its own, and templates are emitted in the
// user's translation units.
#pragma once

#if defined(__GNUC__)
#define URT_HOT [[gnu::hot]]
#else
#define URT_HOT
#endif
