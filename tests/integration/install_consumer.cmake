# Driver of the integration tests registered by tests/integration/CMakeLists.txt:
#   cmake -DURT_STEP=<step> -DURT_BUILD_DIR=<urt build> ... -P install_consumer.cmake
# Steps:
#   install           build the urt target, install it into a fresh URT_PREFIX
#   cmake             configure, build and run consumer/ with
#                     find_package(urt) and CMAKE_PREFIX_PATH=URT_PREFIX
#   pkgconfig         c++ -std=c++20 consumer/main.cpp $(pkg-config --cflags --libs urt), run it
#   pkgconfig-static  the same with `pkg-config --static`
#   install-all       build urt and urt-cyclictest, run a plain `cmake --install`
#                     (every component) into a fresh URT_FULL_PREFIX, check that
#                     it holds the library, the packages and, in bin/,
#                     urt-cyclictest and compare-cyclictest, and run both
# The consumers get URT_CXX_COMPILER, URT_CXX_FLAGS and URT_EXE_LINKER_FLAGS
# (the urt build's), so sanitizer builds produce consumers that link.
cmake_minimum_required(VERSION 3.25)

foreach(var IN ITEMS URT_STEP URT_BUILD_DIR URT_CONSUMER_DIR URT_WORK_DIR URT_PREFIX
                     URT_INSTALL_LIBDIR URT_VERSION URT_GENERATOR URT_CXX_COMPILER)
  if("${${var}}" STREQUAL "")
    message(FATAL_ERROR "install_consumer: -D${var}=... is required")
  endif()
endforeach()
if(IS_ABSOLUTE "${URT_INSTALL_LIBDIR}")
  message(FATAL_ERROR "install_consumer: CMAKE_INSTALL_LIBDIR is absolute (${URT_INSTALL_LIBDIR}); "
                      "installing into a test prefix needs a relative one")
endif()

set(libdir "${URT_PREFIX}/${URT_INSTALL_LIBDIR}")
set(config_args "")
if(NOT "${URT_BUILD_TYPE}" STREQUAL "")
  set(config_args --config "${URT_BUILD_TYPE}")
endif()
separate_arguments(cxx_flags UNIX_COMMAND "${URT_CXX_FLAGS}")
separate_arguments(exe_linker_flags UNIX_COMMAND "${URT_EXE_LINKER_FLAGS}")

# urt_run(<what> COMMAND <command>...): runs the command, echoing it; stops
# with a message naming <what> if it fails.
function(urt_run what)
  execute_process(${ARGN} COMMAND_ECHO STDOUT RESULT_VARIABLE rc TIMEOUT 280)
  if(NOT rc STREQUAL "0")
    list(REMOVE_AT ARGN 0)
    list(JOIN ARGN " " cmd)
    message(FATAL_ERROR "install_consumer: ${what} failed (${rc}):\n  ${cmd}")
  endif()
endfunction()

# urt_capture(<out> <what> <command>...): runs the command, echoing it; its
# stdout and stderr go to `out`. Stops with the output if it fails.
function(urt_capture out what)
  list(JOIN ARGN " " cmd)
  message(STATUS "install_consumer: ${cmd}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE output ERROR_VARIABLE output
                  TIMEOUT 60)
  if(NOT rc STREQUAL "0")
    message(FATAL_ERROR "install_consumer: ${what} failed (${rc}):\n  ${cmd}\n${output}")
  endif()
  set(${out} "${output}" PARENT_SCOPE)
endfunction()

# Runs `pkg-config <args>` against the test prefix; its stdout goes to `out`.
function(urt_pkg_config out)
  execute_process(COMMAND "${URT_PKG_CONFIG}" ${ARGN} RESULT_VARIABLE rc
                  OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc STREQUAL "0")
    list(JOIN ARGN " " args)
    message(FATAL_ERROR "install_consumer: `pkg-config ${args}` failed (${rc}) with "
                        "PKG_CONFIG_PATH=$ENV{PKG_CONFIG_PATH}:\n${stderr}")
  endif()
  set(${out} "${stdout}" PARENT_SCOPE)
endfunction()

# Puts `dir` in front of the colon-separated search path in env var `var`.
function(urt_prepend_env var dir)
  if("$ENV{${var}}" STREQUAL "")
    set(ENV{${var}} "${dir}")
  else()
    set(ENV{${var}} "${dir}:$ENV{${var}}")
  endif()
endfunction()

# Runs a consumer executable; it exits 0 only when its task ran.
function(urt_run_consumer exe)
  if(NOT EXISTS "${exe}")
    message(FATAL_ERROR "install_consumer: the consumer was built but ${exe} does not exist")
  endif()
  # For a shared liburt: the pkg-config consumer has no rpath to the prefix.
  urt_prepend_env(LD_LIBRARY_PATH "${libdir}")
  urt_run("running the consumer ${exe}" COMMAND "${exe}")
endfunction()

if(URT_STEP STREQUAL "install")
  urt_run("building the urt library in ${URT_BUILD_DIR}"
          COMMAND "${CMAKE_COMMAND}" --build "${URT_BUILD_DIR}" --target urt ${config_args})
  file(REMOVE_RECURSE "${URT_PREFIX}")
  foreach(component IN ITEMS urt_runtime urt_development)
    urt_run("installing component ${component} into ${URT_PREFIX}"
            COMMAND "${CMAKE_COMMAND}" --install "${URT_BUILD_DIR}" --prefix "${URT_PREFIX}"
                    --component ${component} ${config_args})
  endforeach()
  set(missing "")
  foreach(file IN ITEMS include/urt/urt.hpp
                        ${URT_INSTALL_LIBDIR}/cmake/urt/urtConfig.cmake
                        ${URT_INSTALL_LIBDIR}/cmake/urt/urtConfigVersion.cmake
                        ${URT_INSTALL_LIBDIR}/cmake/urt/urtTargets.cmake
                        ${URT_INSTALL_LIBDIR}/cmake/urt/urtDependencies.cmake
                        ${URT_INSTALL_LIBDIR}/pkgconfig/urt.pc)
    if(NOT EXISTS "${URT_PREFIX}/${file}")
      list(APPEND missing "${file}")
    endif()
  endforeach()
  file(GLOB library "${libdir}/liburt.a" "${libdir}/liburt.so")
  if(NOT library)
    list(APPEND missing "${URT_INSTALL_LIBDIR}/liburt.a or liburt.so")
  endif()
  if(missing)
    list(JOIN missing "\n  " missing)
    message(FATAL_ERROR "install_consumer: the install into ${URT_PREFIX} lacks:\n  ${missing}")
  endif()
  # Only the public headers: nothing from runtime/ or elsewhere.
  file(GLOB_RECURSE stray RELATIVE "${URT_PREFIX}" "${URT_PREFIX}/include/*")
  list(FILTER stray EXCLUDE REGEX "^include/urt/[^/]+\\.hpp$")
  if(stray)
    message(FATAL_ERROR "install_consumer: unexpected files under include/: ${stray}")
  endif()
  message(STATUS "install_consumer: installed urt into ${URT_PREFIX}")

elseif(URT_STEP STREQUAL "cmake")
  set(bin "${URT_WORK_DIR}/consumer-cmake")
  file(REMOVE_RECURSE "${bin}")
  set(make_program "")
  if(NOT "${URT_MAKE_PROGRAM}" STREQUAL "")
    set(make_program "-DCMAKE_MAKE_PROGRAM=${URT_MAKE_PROGRAM}")
  endif()
  urt_run("configuring the consumer against ${URT_PREFIX}"
          COMMAND "${CMAKE_COMMAND}" -S "${URT_CONSUMER_DIR}" -B "${bin}" -G "${URT_GENERATOR}"
                  ${make_program}
                  "-DCMAKE_BUILD_TYPE=${URT_BUILD_TYPE}"
                  "-DCMAKE_CXX_COMPILER=${URT_CXX_COMPILER}"
                  "-DCMAKE_CXX_FLAGS=${URT_CXX_FLAGS}"
                  "-DCMAKE_EXE_LINKER_FLAGS=${URT_EXE_LINKER_FLAGS}"
                  "-DCMAKE_PREFIX_PATH=${URT_PREFIX}"
                  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
                  -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF)
  # The consumer must have found this install, not another urt on the system.
  file(STRINGS "${bin}/CMakeCache.txt" urt_dir REGEX "^urt_DIR:")
  string(REGEX REPLACE "^urt_DIR:[^=]*=" "" urt_dir "${urt_dir}")
  file(REAL_PATH "${urt_dir}" urt_dir)
  file(REAL_PATH "${URT_PREFIX}" real_prefix)
  string(FIND "${urt_dir}/" "${real_prefix}/" at)
  if(NOT at EQUAL 0)
    message(FATAL_ERROR "install_consumer: find_package(urt) used ${urt_dir}, "
                        "not the test install in ${URT_PREFIX}")
  endif()
  urt_run("building the consumer" COMMAND "${CMAKE_COMMAND}" --build "${bin}" ${config_args})
  set(exe "${bin}/consumer")
  if(NOT EXISTS "${exe}" AND EXISTS "${bin}/${URT_BUILD_TYPE}/consumer")  # multi-config
    set(exe "${bin}/${URT_BUILD_TYPE}/consumer")
  endif()
  urt_run_consumer("${exe}")

elseif(URT_STEP STREQUAL "pkgconfig" OR URT_STEP STREQUAL "pkgconfig-static")
  if("${URT_PKG_CONFIG}" STREQUAL "")
    message(FATAL_ERROR "install_consumer: -DURT_PKG_CONFIG=<pkg-config executable> is required")
  endif()
  set(pcdir "${libdir}/pkgconfig")
  if(NOT EXISTS "${pcdir}/urt.pc")
    message(FATAL_ERROR "install_consumer: ${pcdir}/urt.pc does not exist "
                        "(CMAKE_INSTALL_LIBDIR=${URT_INSTALL_LIBDIR}); did integration/install run?")
  endif()
  urt_prepend_env(PKG_CONFIG_PATH "${pcdir}")
  urt_pkg_config(ignored --validate urt)
  urt_pkg_config(version --modversion urt)
  if(NOT version STREQUAL URT_VERSION)
    message(FATAL_ERROR "install_consumer: urt.pc says version '${version}', expected ${URT_VERSION}")
  endif()

  set(static "")
  set(bin "${URT_WORK_DIR}/consumer-pkgconfig")
  if(URT_STEP STREQUAL "pkgconfig-static")
    set(static --static)
    set(bin "${URT_WORK_DIR}/consumer-pkgconfig-static")
  endif()
  file(REMOVE_RECURSE "${bin}")
  file(MAKE_DIRECTORY "${bin}")

  if(static)
    # --static adds the Libs.private of urt's dependencies; Debian's hwloc.pc
    # lists -ludev there, which only links with libudev-dev installed. That
    # is the system's business, not urt.pc's: skip when the dependencies
    # alone do not link that way.
    urt_pkg_config(requires --print-requires urt)
    urt_pkg_config(requires_private --print-requires-private urt)
    string(REGEX MATCHALL "(^|\n)[^ \n]+" deps "${requires}\n${requires_private}")
    string(REGEX REPLACE "\n" "" deps "${deps}")
    if(NOT deps)
      message(FATAL_ERROR "install_consumer: urt.pc requires nothing; expected hwloc and liburcu")
    endif()
    list(JOIN deps " " deps_text)
    urt_pkg_config(dep_libs --static --libs ${deps})
    separate_arguments(dep_libs UNIX_COMMAND "${dep_libs}")
    file(WRITE "${bin}/probe.cpp" "int main() { return 0; }\n")
    execute_process(COMMAND "${URT_CXX_COMPILER}" ${cxx_flags} "${bin}/probe.cpp" -o "${bin}/probe"
                            ${exe_linker_flags} ${dep_libs}
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
    if(NOT rc STREQUAL "0")
      message(STATUS "install_consumer: SKIPPED: `pkg-config --static --libs ${deps_text}` does not "
                     "link even without urt (on Debian 12 hwloc needs libudev-dev for that):\n${out}")
      return()
    endif()
  endif()

  urt_pkg_config(cflags ${static} --cflags urt)
  urt_pkg_config(libs ${static} --libs urt)
  string(JOIN " " how pkg-config ${static} --cflags --libs urt)
  message(STATUS "install_consumer: ${how}: ${cflags} ${libs}")
  separate_arguments(cflags UNIX_COMMAND "${cflags}")
  separate_arguments(libs UNIX_COMMAND "${libs}")
  urt_run("compiling the consumer with ${how}"
          COMMAND "${URT_CXX_COMPILER}" -std=c++20 ${cxx_flags} ${cflags}
                  "${URT_CONSUMER_DIR}/main.cpp" -o "${bin}/consumer" ${exe_linker_flags} ${libs})
  urt_run_consumer("${bin}/consumer")

elseif(URT_STEP STREQUAL "install-all")
  foreach(var IN ITEMS URT_FULL_PREFIX URT_INSTALL_BINDIR)
    if("${${var}}" STREQUAL "")
      message(FATAL_ERROR "install_consumer: -D${var}=... is required")
    endif()
  endforeach()
  urt_run("building urt and urt-cyclictest in ${URT_BUILD_DIR}"
          COMMAND "${CMAKE_COMMAND}" --build "${URT_BUILD_DIR}" --target urt urt-cyclictest
                  ${config_args})
  file(REMOVE_RECURSE "${URT_FULL_PREFIX}")
  urt_run("installing every component into ${URT_FULL_PREFIX}"
          COMMAND "${CMAKE_COMMAND}" --install "${URT_BUILD_DIR}" --prefix "${URT_FULL_PREFIX}"
                  ${config_args})
  set(bin "${URT_FULL_PREFIX}/${URT_INSTALL_BINDIR}")
  set(missing "")
  foreach(file IN ITEMS include/urt/urt.hpp
                        ${URT_INSTALL_LIBDIR}/cmake/urt/urtConfig.cmake
                        ${URT_INSTALL_LIBDIR}/pkgconfig/urt.pc
                        ${URT_INSTALL_BINDIR}/urt-cyclictest
                        ${URT_INSTALL_BINDIR}/compare-cyclictest)
    if(NOT EXISTS "${URT_FULL_PREFIX}/${file}")
      list(APPEND missing "${file}")
    endif()
  endforeach()
  if(missing)
    list(JOIN missing "\n  " missing)
    message(FATAL_ERROR "install_consumer: `cmake --install` into ${URT_FULL_PREFIX} lacks:\n"
                        "  ${missing}")
  endif()

  # The installed urt-cyclictest runs from the prefix alone (a shared liburt
  # through its RPATH: no LD_LIBRARY_PATH here), without root: --help, then
  # a 10-release measurement at SCHED_OTHER.
  urt_capture(help "the installed urt-cyclictest --help" "${bin}/urt-cyclictest" --help)
  if(NOT help MATCHES "Usage: ")
    message(FATAL_ERROR "install_consumer: urt-cyclictest --help printed no usage:\n${help}")
  endif()
  urt_capture(out "a 10-loop run of the installed urt-cyclictest"
              "${bin}/urt-cyclictest" -t 1 -i 1000 -l 10 -q --policy=other)
  if(NOT out MATCHES "T: 0 [^\n]* C: +10 ")
    message(FATAL_ERROR "install_consumer: urt-cyclictest -l 10 did not report 10 cycles:\n${out}")
  endif()

  # The installed compare-cyclictest runs (its shebang finds python3) and by
  # default uses the urt-cyclictest installed next to it, not one in a build
  # tree or on PATH. Its --help names the binary it would run; argparse wraps
  # the text wherever the path's length puts a line end (after a space or a
  # hyphen), so compare both with every blank and line break taken out.
  urt_capture(help "the installed compare-cyclictest --help" "${bin}/compare-cyclictest" --help)
  string(REGEX REPLACE "[ \n]+" "" help_joined "${help}")
  file(REAL_PATH "${bin}/urt-cyclictest" installed)
  string(REGEX REPLACE "[ \n]+" "" installed_joined "${installed}")
  string(FIND "${help_joined}" "here${installed_joined})" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "install_consumer: the installed compare-cyclictest does not default to "
                        "${installed}; its --help says:\n${help}")
  endif()
  message(STATUS "install_consumer: ${URT_INSTALL_BINDIR}/urt-cyclictest and "
                 "${URT_INSTALL_BINDIR}/compare-cyclictest installed and run")

else()
  message(FATAL_ERROR "install_consumer: unknown -DURT_STEP=${URT_STEP} "
                      "(install, cmake, pkgconfig, pkgconfig-static or install-all)")
endif()
