# The dependency rules of the README, checked on the built objects (cmake -P, run by the build):
# every nvf_ function that module MODULE's objects call must be defined in MODULE itself or in
# one of the modules it links (its target_link_libraries in CMakeLists.txt). Include paths stop
# a module from reading another's private headers; this stops it from calling a module it does
# not link through a declaration of its own.
#   -DNM=nm -DMODULE=name -DOBJS=a.o|b.o -DALLOWED=c.o|d.a -DSTAMP=file
cmake_minimum_required(VERSION 3.25)
string(REPLACE "|" ";" objs "${OBJS}")
string(REPLACE "|" ";" allowed "${ALLOWED}")
execute_process(COMMAND ${NM} -u ${objs} OUTPUT_VARIABLE undefined RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "layering: ${NM} -u failed on ${MODULE}")
endif()
execute_process(COMMAND ${NM} -g --defined-only ${objs} ${allowed} OUTPUT_VARIABLE defined
    RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "layering: ${NM} --defined-only failed on ${MODULE}")
endif()
string(REGEX MATCHALL "U nvf_[A-Za-z0-9_]+" calls "${undefined}")
string(REGEX MATCHALL " [A-Za-z] nvf_[A-Za-z0-9_]+" defs "${defined}")
set(have)
foreach(d ${defs})
    string(REGEX REPLACE "^ [A-Za-z] " "" d "${d}")
    list(APPEND have ${d})
endforeach()
set(bad)
foreach(c ${calls})
    string(REGEX REPLACE "^U " "" c "${c}")
    if(NOT c IN_LIST have)
        list(APPEND bad ${c})
    endif()
endforeach()
if(bad)
    list(REMOVE_DUPLICATES bad)
    list(JOIN bad ", " bad)
    message(FATAL_ERROR "layering: ${MODULE} calls ${bad}, defined in no module it links; "
        "link that module in CMakeLists.txt (and say so in the README's dependency rules) or "
        "do not call it")
endif()
file(WRITE ${STAMP} "")
