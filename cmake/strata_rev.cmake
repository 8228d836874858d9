# Writes OUT, a header defining STRATA_GIT_REV (the revision `strata --version` and the
# benchmarks print), at every build: REV when given (-DSTRATA_REV=...), else git's HEAD
# of SRC with "-dirty" when tracked files differ from it, else "unknown" (SRC not the
# top of a git work tree: a copy made by `git archive`, even inside another checkout).
# OUT is rewritten only when its text changes, so an unchanged revision rebuilds nothing.
set(rev "${REV}")
if(NOT rev)
  execute_process(COMMAND git rev-parse --show-toplevel WORKING_DIRECTORY "${SRC}"
                  OUTPUT_VARIABLE top OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  get_filename_component(src_real "${SRC}" REALPATH)
  if(top)
    get_filename_component(top "${top}" REALPATH)
  endif()
  if(top STREQUAL src_real)
    execute_process(COMMAND git rev-parse --short HEAD WORKING_DIRECTORY "${SRC}"
                    OUTPUT_VARIABLE rev OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    execute_process(COMMAND git status --porcelain --untracked-files=no WORKING_DIRECTORY "${SRC}"
                    OUTPUT_VARIABLE dirty OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(rev AND dirty)
      set(rev "${rev}-dirty")
    endif()
  endif()
endif()
if(NOT rev)
  set(rev unknown)
endif()
set(text "/* generated at build time by cmake/strata_rev.cmake */\n#define STRATA_GIT_REV \"${rev}\"\n")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
